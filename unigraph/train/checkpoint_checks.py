"""What a checkpoint's content must be before a run resumes from it.

A checkpoint's checksum proves its bytes are what a writer wrote, not that the writer was
friendly or correct: anyone can change a value and recompute the checksum. So every value a
resumed run would restore is checked first, and a value a fresh run would never hold is refused
with a :class:`~unigraph.train.checkpoint.CheckpointError` naming the file and the field (never a
traceback out of ``load_state_dict``, never a run that silently trains with ``lr = nan``):

* **file level** (:func:`check_content`, from :func:`unigraph.train.checkpoint.check_state`): the
  early-stopping record (accuracies in ``[0, 1]``, ``best_epoch`` and ``bad_epochs`` in
  ``0..epoch``, a ``best_state`` of finite tensors), the loader's position, every rank's RNG state
  (torch's state of its exact length, numpy's MT19937 words and position, Python's), the model's
  tensors finite, the optimizer states' tensors finite and their ``step`` a whole number ``>= 0``;
* **run level** (:func:`check_restorable`, before anything is restored, with the resuming run's
  model and fresh optimizer): the model's keys, shapes and dtypes exactly the model's (a missing
  or extra key is named), ``best_state`` likewise, and each optimizer's hyperparameters exactly
  those of the fresh optimizer this run builds (``lr``, ``betas``, ``eps``, ``weight_decay``, ...:
  no scheduler changes them, so ``lr = 1e30`` or ``betas = (5, -1)`` cannot come from a run with
  these settings) and its per-parameter state shaped as the parameters, ``exp_avg_sq >= 0``.
"""
from __future__ import annotations

import math

import torch

# per-parameter state a torch optimizer keeps, and which entries must be >= 0
OPTIMIZER_STATE = {"Adam": ("step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"), "SGD": ("momentum_buffer",)}
NON_NEGATIVE_STATE = ("exp_avg_sq", "max_exp_avg_sq")
MT_WORDS = 624  # numpy's and Python's Mersenne Twister: 624 words of 32 bits


class ContentError(ValueError):
    """A checkpoint value a run never holds (the message names the field);
    :mod:`unigraph.train.checkpoint` turns it into a ``CheckpointError`` naming the file."""


def _require(condition: bool, problem: str) -> None:
    if not condition:
        raise ContentError(problem)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite_tensors(field: str, tensors: dict) -> None:
    for name, tensor in tensors.items():
        _require(isinstance(tensor, torch.Tensor), f"{field}[{name!r}] is a {type(tensor).__name__}, not a tensor")
        if tensor.is_floating_point() or tensor.is_complex():
            _require(bool(torch.isfinite(tensor).all()), f"{field}[{name!r}] holds NaN or infinite values")


# ---------------------------------------------------------------------------------------------- file level
def _check_early_stopping(record: dict, epoch: int) -> None:
    field = "early_stopping"
    patience = record["patience"]
    _require(patience is None or (_is_int(patience) and patience >= 1),
             f"{field}.patience must be None or an int >= 1, got {patience!r}")
    for key in ("best_acc", "best_test_acc", "best_loss"):
        _require(_is_number(record[key]), f"{field}.{key} must be a number, got {record[key]!r}")
    best_acc, best_test, best_loss = (float(record[k]) for k in ("best_acc", "best_test_acc", "best_loss"))
    _require(best_acc == -math.inf or 0.0 <= best_acc <= 1.0,
             f"{field}.best_acc must be an accuracy in [0, 1] (or -inf before any evaluation), got {best_acc!r}")
    _require(math.isnan(best_test) or 0.0 <= best_test <= 1.0,
             f"{field}.best_test_acc must be an accuracy in [0, 1] (or nan), got {best_test!r}")
    _require(math.isnan(best_loss) or best_loss >= 0.0,
             f"{field}.best_loss must be a loss >= 0 (or inf / nan), got {best_loss!r}")
    for key in ("best_epoch", "bad_epochs"):
        value = record[key]
        _require(_is_int(value) and 0 <= value <= epoch, f"{field}.{key} must be an int in 0..{epoch} (the epochs "
                                                         f"completed), got {value!r}")
    best_state = record["best_state"]
    _require(best_state is None or (isinstance(best_state, dict) and all(isinstance(k, str) for k in best_state)),
             f"{field}.best_state must be None or a dict of tensors, got {type(best_state).__name__}")
    if best_state is not None:
        _finite_tensors(f"{field}.best_state", best_state)


def _check_loader(loader, epoch: int) -> None:
    if loader is None:
        return
    _require(set(loader) == {"epoch", "seed"}, f"loader must hold the keys ['epoch', 'seed'], got {sorted(loader)}")
    _require(_is_int(loader["epoch"]) and 0 <= loader["epoch"] <= epoch,
             f"loader.epoch must be an int in 0..{epoch}, got {loader['epoch']!r}")
    _require(_is_int(loader["seed"]), f"loader.seed must be an int, got {loader['seed']!r}")


def _words(field: str, tensor, count: int) -> None:
    _require(isinstance(tensor, torch.Tensor) and tensor.dtype == torch.int64 and tuple(tensor.shape) == (count,),
             f"{field} must be an int64 tensor of {count} words, got "
             f"{getattr(tensor, 'dtype', type(tensor).__name__)} {list(getattr(tensor, 'shape', []))}")
    _require(bool(((tensor >= 0) & (tensor < 2 ** 32)).all()), f"{field} holds words outside 0..2**32-1")


def _check_rng(rank: int, state: dict) -> None:
    field = f"rng[{rank}]"
    _require(isinstance(state, dict) and {"torch", "numpy", "python"} <= set(state) <= {"torch", "numpy", "python",
                                                                                          "cuda"},
             f"{field} must hold 'torch', 'numpy' and 'python' (and optionally 'cuda'), got "
             f"{sorted(state) if isinstance(state, dict) else type(state).__name__}")
    expected = torch.get_rng_state()
    saved = state["torch"]
    _require(isinstance(saved, torch.Tensor) and saved.dtype == torch.uint8 and saved.shape == expected.shape,
             f"{field}.torch must be a uint8 tensor of {expected.numel()} bytes (torch's CPU generator state), got "
             f"{getattr(saved, 'dtype', type(saved).__name__)} {list(getattr(saved, 'shape', []))}")
    numpy_state = state["numpy"]
    _require(isinstance(numpy_state, dict) and set(numpy_state) == {"kind", "keys", "pos", "has_gauss",
                                                                    "cached_gaussian"},
             f"{field}.numpy must hold kind, keys, pos, has_gauss and cached_gaussian")
    _require(numpy_state["kind"] == "MT19937", f"{field}.numpy.kind must be 'MT19937', got {numpy_state['kind']!r}")
    _words(f"{field}.numpy.keys", numpy_state["keys"], MT_WORDS)
    _require(_is_int(numpy_state["pos"]) and 0 <= numpy_state["pos"] <= MT_WORDS,
             f"{field}.numpy.pos must be an int in 0..{MT_WORDS}, got {numpy_state['pos']!r}")
    _require(numpy_state["has_gauss"] in (0, 1) and _is_int(numpy_state["has_gauss"]),
             f"{field}.numpy.has_gauss must be 0 or 1, got {numpy_state['has_gauss']!r}")
    _require(_is_number(numpy_state["cached_gaussian"]) and math.isfinite(numpy_state["cached_gaussian"]),
             f"{field}.numpy.cached_gaussian must be a finite number, got {numpy_state['cached_gaussian']!r}")
    python_state = state["python"]
    _require(isinstance(python_state, dict) and set(python_state) == {"version", "words", "gauss_next"},
             f"{field}.python must hold version, words and gauss_next")
    _require(python_state["version"] == 3 and _is_int(python_state["version"]),
             f"{field}.python.version must be 3, got {python_state['version']!r}")
    _words(f"{field}.python.words", python_state["words"], MT_WORDS + 1)
    _require(int(python_state["words"][-1]) <= MT_WORDS, f"{field}.python.words ends with a position beyond {MT_WORDS}")
    gauss = python_state["gauss_next"]
    _require(gauss is None or (_is_number(gauss) and math.isfinite(gauss)),
             f"{field}.python.gauss_next must be None or a finite number, got {gauss!r}")
    if "cuda" in state:
        _require(isinstance(state["cuda"], list) and all(isinstance(t, torch.Tensor) and t.dtype == torch.uint8
                                                         for t in state["cuda"]),
                 f"{field}.cuda must be a list of uint8 tensors")


def _check_optimizer_record(field: str, record) -> None:
    _require(isinstance(record, dict) and set(record) == {"state", "param_groups"},
             f"{field} must be an optimizer state_dict (keys 'state' and 'param_groups'), got "
             f"{sorted(record) if isinstance(record, dict) else type(record).__name__}")
    _require(isinstance(record["param_groups"], list) and all(isinstance(g, dict) for g in record["param_groups"]),
             f"{field}.param_groups must be a list of dicts")
    _require(isinstance(record["state"], dict), f"{field}.state must be a dict")
    for param, entry in record["state"].items():
        where = f"{field}.state[{param!r}]"
        _require(_is_int(param) and isinstance(entry, dict), f"{where} must be a dict keyed by a parameter index")
        for name, value in entry.items():
            _require(isinstance(value, torch.Tensor), f"{where}[{name!r}] is a {type(value).__name__}, not a tensor")
            _require(bool(torch.isfinite(value).all()) if value.is_floating_point() else True,
                     f"{where}[{name!r}] holds NaN or infinite values")
            if name == "step":
                _require(value.numel() == 1 and float(value) >= 0 and float(value) == int(float(value)),
                         f"{where}['step'] must be a whole number >= 0, got {value.flatten()[:4].tolist()}")
            if name in NON_NEGATIVE_STATE:
                _require(bool((value >= 0).all()), f"{where}[{name!r}] holds negative values (a running mean of squares)")


def check_content(state: dict, epoch: int) -> None:
    """The file-level checks of the module docstring on a state whose keys and types are known.
    Raises :class:`ContentError`."""
    _finite_tensors("model", state["model"])
    _check_early_stopping(state["early_stopping"], epoch)
    _check_loader(state["loader"], epoch)
    for rank, rng in enumerate(state["rng"]):
        _check_rng(rank, rng)
    optimizers = state["optimizer"]
    if isinstance(optimizers, list):  # a pipeline run: one per stage
        for stage, record in enumerate(optimizers):
            _check_optimizer_record(f"optimizer[{stage}]", record)
    else:
        _check_optimizer_record("optimizer", optimizers)


# ---------------------------------------------------------------------------------------------- run level
def _check_model_like(field: str, saved: dict, model: torch.nn.Module) -> None:
    expected = model.state_dict()
    missing, extra = sorted(set(expected) - set(saved)), sorted(set(saved) - set(expected))
    _require(not missing and not extra, f"{field} does not match this run's model: "
             + "; ".join(part for part in (f"missing keys {missing[:8]}" if missing else "",
                                           f"unexpected keys {extra[:8]}" if extra else "") if part))
    for name, tensor in expected.items():
        value = saved[name]
        _require(value.shape == tensor.shape and value.dtype == tensor.dtype,
                 f"{field}[{name!r}] has shape {list(value.shape)} {value.dtype}, this run's model has "
                 f"{list(tensor.shape)} {tensor.dtype}")


def _same(a, b) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and bool((a == b).all())
    return type(a) is type(b) and a == b


def _check_optimizer(field: str, saved: dict, optimizer: torch.optim.Optimizer, *, shapes: bool) -> None:
    """``saved`` against this run's fresh ``optimizer``: the same hyperparameters in the same
    groups and, with ``shapes``, per-parameter state shaped as the parameters it belongs to."""
    fresh_groups = optimizer.state_dict()["param_groups"]
    saved_groups = saved["param_groups"]
    _require(len(saved_groups) == len(fresh_groups),
             f"{field} has {len(saved_groups)} parameter groups, this run's optimizer {len(fresh_groups)}")
    params: dict[int, torch.Tensor] = {}
    for g, (old, new, live) in enumerate(zip(saved_groups, fresh_groups, optimizer.param_groups)):
        where = f"{field}.param_groups[{g}]"
        # keys a newer torch added are missing from an older file (torch fills in their defaults); a
        # key this torch does not know would ride along into the optimizer unchecked
        _require(set(old) <= set(new) and "params" in old,
                 f"{where} has the keys {sorted(old)}, this run's {type(optimizer).__name__} {sorted(new)}")
        for key in sorted(set(old) - {"params"}):
            _require(_same(old[key], new[key]), f"{where}.{key} is {old[key]!r:.80}, but this run's optimizer has "
                                                f"{new[key]!r:.80} (the settings must match the run that wrote it)")
        ids = old["params"]
        _require(isinstance(ids, list) and all(_is_int(i) for i in ids) and len(ids) == len(new["params"]),
                 f"{where}.params must list {len(new['params'])} parameter indices")
        params.update(zip(ids, live["params"]))
    allowed = OPTIMIZER_STATE.get(type(optimizer).__name__)
    for param, entry in saved["state"].items():
        where = f"{field}.state[{param}]"
        _require(not shapes or param in params, f"{where} belongs to no parameter of the optimizer's groups")
        if allowed is not None:
            _require(set(entry) <= set(allowed), f"{where} holds {sorted(entry)}; a {type(optimizer).__name__} keeps "
                                                 f"only {list(allowed)}")
        if not shapes:
            continue
        for name, value in entry.items():
            if name != "step":
                _require(value.shape == params[param].shape, f"{where}[{name!r}] has shape {list(value.shape)}, its "
                                                              f"parameter {list(params[param].shape)}")


def check_restorable(state: dict, model: torch.nn.Module, optimizer: torch.optim.Optimizer, *,
                     stage: int | None = None) -> None:
    """The run-level checks of the module docstring, before anything is restored: ``state`` (a
    checked checkpoint) against the resuming run's ``model`` and its fresh ``optimizer``. A
    pipeline run saves one optimizer per stage: ``stage`` picks the one ``optimizer`` (that
    stage's) must match; without ``stage`` (checks before the stages exist, given an optimizer
    over the whole model) each is checked for its hyperparameters only. Raises :class:`ContentError`."""
    _check_model_like("model", state["model"], model)
    best = state["early_stopping"]["best_state"]
    if best is not None:
        _check_model_like("early_stopping.best_state", best, model)
    saved = state["optimizer"]
    if stage is not None:
        _require(isinstance(saved, list) and 0 <= stage < len(saved),
                 f"optimizer must be a list with one state per pipeline stage (stage {stage} needed)")
        _check_optimizer(f"optimizer[{stage}]", saved[stage], optimizer, shapes=True)
    elif isinstance(saved, list):
        for index, record in enumerate(saved):
            _check_optimizer(f"optimizer[{index}]", record, optimizer, shapes=False)
    else:
        _check_optimizer("optimizer", saved, optimizer, shapes=True)
