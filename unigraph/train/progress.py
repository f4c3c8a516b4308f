"""A per-epoch progress display: a tqdm bar where tqdm is installed and wanted, plain text lines
otherwise. tqdm is optional; nothing else in unigraph needs it."""
from __future__ import annotations

import importlib.util
import sys
from typing import Callable, TextIO

from unigraph.train.metrics import EpochMetrics


def tqdm_installed() -> bool:
    return importlib.util.find_spec("tqdm") is not None


class Progress:
    """Shows each finished epoch.

    Modes: ``"bar"`` (tqdm; a ``ValueError`` if it is not installed), ``"text"`` (a line every
    ``log_every`` epochs, and the first and last), ``"off"``, and ``"auto"``: the bar when tqdm is
    installed and ``stream`` is a terminal, text otherwise (logs and pipes get whole lines).
    """

    def __init__(self, total_epochs: int, *, mode: str = "auto", log_every: int = 10, start_epoch: int = 0,
                 stream: TextIO | None = None, write: Callable[[str], None] | None = None):
        self.total = total_epochs
        self.log_every = log_every
        self.stream = stream if stream is not None else sys.stderr
        self._write = write or (lambda text: print(text, file=self.stream, flush=True))
        if mode == "auto":
            mode = "bar" if tqdm_installed() and getattr(self.stream, "isatty", lambda: False)() else "text"
        if mode == "bar" and not tqdm_installed():
            raise ValueError("progress='bar' needs tqdm (pip install tqdm); use progress='text' for plain lines")
        self.mode = mode
        self._bar = None
        if mode == "bar":
            from tqdm import tqdm  # noqa: PLC0415 - optional dependency
            self._bar = tqdm(total=total_epochs, initial=start_epoch, file=self.stream, unit="epoch", dynamic_ncols=True)

    def update(self, metrics: EpochMetrics) -> None:
        if self.mode == "bar":
            self._bar.set_postfix(loss=f"{metrics.loss:.4f}", val=f"{metrics.val_acc:.3f}", test=f"{metrics.test_acc:.3f}",
                                  refresh=False)
            self._bar.update(1)
        elif self.mode == "text":
            if metrics.epoch == 1 or metrics.epoch % self.log_every == 0 or metrics.epoch == self.total:
                self._write(metrics.line(self.total))

    def message(self, text: str) -> None:
        """A line that does not break the bar."""
        if self.mode == "bar":
            self._bar.write(text, file=self.stream)
        elif self.mode == "text":
            self._write(text)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
