"""unigraph/_openmp.py and kernels/cpu/openmp.py: importing unigraph leaves torch's OpenMP wait policy as the user has it (the
environment untouched, whatever the import order); numba's own pool (a second libgomp, loaded when
it starts) waits passively unless the user chose a policy or a spin count; benchmark reports say
what each runtime read. Each case runs in a fresh interpreter (a libgomp reads the environment when
it loads) with ``OMP_DISPLAY_ENV=VERBOSE``, so each libgomp prints the spin count it runs with."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from unigraph.kernels.cpu import numba_status

pytestmark = pytest.mark.skipif(not numba_status()[0], reason="numba is not installed: no numba pool")

SPIN_DEFAULT, SPIN_PASSIVE, SPIN_ACTIVE = "300000", "0", "30000000000"


def _run(code: str, **env_vars: str) -> tuple[list[str], list[str]]:
    """``(the last printed line split on '|', the spin count of each libgomp in load order)``."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(env_vars, OMP_DISPLAY_ENV="VERBOSE")
    script = (code + "; import os; from unigraph import _openmp; from unigraph.kernels.cpu import start_numba_threads; "
              "variable = os.environ.get('OMP_WAIT_POLICY'); start_numba_threads(); "
              "print(repr(variable), repr(os.environ.get('OMP_WAIT_POLICY')), _openmp.wait_policy_in_effect(), sep='|')")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    spins = re.findall(r"GOMP_SPINCOUNT = '(\d+)'", out.stderr)
    if len(spins) != 2:
        pytest.skip(f"this install has {len(spins)} libgomp display(s), not torch's and numba's own two")
    return out.stdout.strip().splitlines()[-1].split("|"), spins


@pytest.mark.parametrize("first", ["unigraph", "torch"])
def test_torch_keeps_its_default_and_numbas_pool_waits_passively(first):
    (variable, after_pool, effect), spins = _run(f"import {first}; import torch, unigraph")
    assert variable == after_pool == "None"           # the environment untouched, children inherit it as it was
    assert spins == [SPIN_DEFAULT, SPIN_PASSIVE]       # torch's libgomp spins as without unigraph; numba's does not
    assert effect == "torch: unset: libgomp's default, spin then sleep; numba's pool: PASSIVE"


@pytest.mark.parametrize("first", ["unigraph", "torch"])
def test_a_policy_the_user_set_holds_for_both(first):
    (variable, after_pool, effect), spins = _run(f"import {first}; import torch, unigraph", OMP_WAIT_POLICY="ACTIVE")
    assert variable == after_pool == "'ACTIVE'"
    assert spins == [SPIN_ACTIVE, SPIN_ACTIVE]
    assert effect == "torch: ACTIVE; numba's pool: ACTIVE"


def test_a_spin_count_the_user_set_is_not_overridden():
    (variable, _, effect), spins = _run("import unigraph", GOMP_SPINCOUNT="1000")
    assert variable == "None" and spins == ["1000", "1000"]
    assert effect.endswith("numba's pool: unset: libgomp's default, spin then sleep")


def test_a_policy_set_after_torch_loaded_is_reported_as_not_in_effect_for_torch():
    (_, _, effect), spins = _run("import torch, unigraph, os; os.environ['OMP_WAIT_POLICY'] = 'PASSIVE'")
    assert spins == [SPIN_DEFAULT, SPIN_PASSIVE]       # numba's libgomp loaded after it: it read it
    assert effect == ("torch: unset: libgomp's default, spin then sleep (the environment says 'PASSIVE', set "
                      "after torch loaded: not in effect); numba's pool: PASSIVE")
