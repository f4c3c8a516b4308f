"""The one error every data-file reader raises for a file it refuses."""
from __future__ import annotations

import os


class DataFileError(ValueError):
    """A data file (Planetoid part, saved dataset, checkpoint) is damaged, inconsistent or hostile.

    The message is ``"<path>: <problem>"``; ``path`` and ``problem`` hold the two parts.
    """

    def __init__(self, path: str | os.PathLike, problem: str):
        self.path = os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")
