"""Per-epoch metrics on disk: CSV and JSON (always), TensorBoard (when asked and installed), and a
PNG of the training curves at the end of the run (when matplotlib is installed).

``metrics.csv`` and ``metrics.json`` are rewritten after every epoch through a temporary file and
an atomic rename, so a run that stops at any point leaves complete files of the epochs it finished
(never a half-written line). TensorBoard (the ``tensorboard`` extra) is optional: asking for it
without it installed is an error before training starts, never a silent no-op; the PNG (the
``plot`` extra) is skipped with a message when matplotlib is absent.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import pathlib
from typing import Callable

from unigraph._optional import require
from unigraph.data import checked_file

CURVES_FILE, CSV_FILE, JSON_FILE = "curves.png", "metrics.csv", "metrics.json"


def atomic_write(path: pathlib.Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (the project's one rule: :mod:`unigraph.data.checked_file`)."""
    with checked_file.atomic_write(path) as file:
        file.write(data)


def _plain(value):
    return None if isinstance(value, float) and math.isnan(value) else value


class MetricsLog:
    """Collects one dict of numbers per epoch (``log``), writes CSV/JSON as it goes, and the PNG
    on :meth:`close`. ``say`` receives the lines telling where things went."""

    def __init__(self, log_dir: str | os.PathLike, *, tensorboard: bool = False, plot: bool = True,
                 say: Callable[[str], None] = print):
        self.dir = pathlib.Path(log_dir)
        if self.dir.exists() and not self.dir.is_dir():
            raise ValueError(f"--log-dir {self.dir}: is a file, not a directory (the metrics files go into a directory)")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ValueError(f"--log-dir {self.dir}: cannot be created ({err.strerror or err})") from None
        self.rows: list[dict] = []
        self.plot, self.say = plot, say
        self._writer = None
        if tensorboard:
            board = require("torch.utils.tensorboard", "--tensorboard", "pip install 'unigraph[tensorboard]'")
            self._writer = board.SummaryWriter(log_dir=str(self.dir / "tensorboard"))

    def log(self, metrics: dict) -> None:
        row = {key: _plain(value) for key, value in metrics.items()}
        self.rows.append(row)
        columns = list(dict.fromkeys(key for r in self.rows for key in r))
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows)
        atomic_write(self.dir / CSV_FILE, text.getvalue().encode())
        atomic_write(self.dir / JSON_FILE, json.dumps(self.rows, indent=1).encode())
        if self._writer is not None:
            for key, value in row.items():
                if key != "epoch" and isinstance(value, (int, float)):
                    self._writer.add_scalar(key, value, row.get("epoch", len(self.rows)))

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        wrote = [str(self.dir / CSV_FILE), str(self.dir / JSON_FILE)]
        if self.plot and self.rows:
            if plot_curves(self.rows, self.dir / CURVES_FILE):
                wrote.append(str(self.dir / CURVES_FILE))
            else:
                self.say("metrics: no curves.png (matplotlib is not installed: pip install 'unigraph[plot]')")
        self.say(f"metrics: wrote {', '.join(wrote)}")


def plot_curves(rows: list[dict], path: pathlib.Path) -> bool:
    """Loss on the left, every other per-epoch score on the right; False without matplotlib."""
    try:
        import matplotlib  # noqa: PLC0415 - optional dependency
    except ImportError:
        return False
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt  # noqa: PLC0415
    epochs = [row["epoch"] for row in rows]
    scores = [key for key in rows[0] if key not in ("epoch", "loss", "seconds", "val_loss")]
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for key in ("loss", "val_loss"):
        if key in rows[0]:
            left.plot(epochs, [row[key] if row[key] is not None else math.nan for row in rows], label=key)
    left.set_xlabel("epoch")
    left.legend()
    for key in scores:
        right.plot(epochs, [row[key] if row[key] is not None else math.nan for row in rows], label=key)
    right.set_xlabel("epoch")
    right.legend()
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    atomic_write(path, buffer.getvalue())
    return True
