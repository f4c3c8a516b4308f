"""The argument parser of every ``unigraph`` command: a usage error is one line, not a usage block.

argparse prints the whole usage (13-22 lines for ``unigraph train``) before the one line that
says what is wrong; :class:`Parser` prints ``<prog>: error: <message>`` and where the usage is
(``see `<prog> --help```), then exits with status 2 as argparse does. Sub-commands made with
``add_subparsers`` inherit the class.
"""
from __future__ import annotations

import argparse
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n(see `{self.prog} --help`)\n")
