"""A pytest plugin that keeps a JSON record of a test run up to date while it runs, so that a run
killed at its time limit still says what passed and what failed.

    pytest -p benchmarks.gpu.pytest_progress --progress-json PATH ...

PATH is rewritten atomically at most once a second and at the end: ``{"status": "running" |
"finished" | "interrupted", "exitstatus", "counts": {outcome: n}, "tests": [{"nodeid", "outcome",
"when", "duration_s", "message"}]}`` (``message`` for failures and errors, the first lines of
pytest's report; for skips the reason). With pytest-xdist only the controller writes. SIGTERM
ends the session as Ctrl-C does, after a last write.
"""
from __future__ import annotations

import json
import os
import pathlib
import signal
import time

import pytest

MESSAGE_CHARS = 3000
SAVE_EVERY_S = 1.0


def pytest_addoption(parser):
    parser.addoption("--progress-json", default=None, help="keep a JSON record of the run here, updated as it goes")


def pytest_configure(config):
    path = config.getoption("--progress-json")
    if path and not hasattr(config, "workerinput"):  # an xdist worker reports to the controller instead
        config.pluginmanager.register(ProgressRecord(pathlib.Path(path)), "unigraph_progress_record")


class ProgressRecord:
    def __init__(self, path: pathlib.Path):
        self.path = path
        self.tests: dict[str, dict] = {}
        self.collect_errors: list[dict] = []
        self.status = "running"
        self.exitstatus = None
        self.started = time.time()
        self.last_save = 0.0
        self.previous_handler = signal.signal(signal.SIGTERM, self._on_sigterm)
        self.save()

    def _on_sigterm(self, signum, frame):
        self.status = "interrupted"
        self.save()
        raise KeyboardInterrupt("SIGTERM: the GPU run's budget for the tests is over")

    def pytest_collectreport(self, report):
        if report.failed:
            self.collect_errors.append({"nodeid": report.nodeid, "message": str(report.longrepr)[-MESSAGE_CHARS:]})
            self.save()

    def pytest_runtest_logreport(self, report):
        entry = self.tests.setdefault(report.nodeid, {"nodeid": report.nodeid, "outcome": "running",
                                                      "when": report.when, "duration_s": 0.0, "message": None})
        entry["duration_s"] = round(entry["duration_s"] + report.duration, 3)
        if (report.when == "call" or not report.passed) and entry["outcome"] in ("running", "passed"):
            entry.update(outcome=_outcome(report), when=report.when, message=_message(report))  # the first non-pass
        if report.when == "teardown" and entry["outcome"] == "running":
            entry["outcome"] = "passed"
        if time.time() - self.last_save > SAVE_EVERY_S:
            self.save()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self.status == "running":
            self.status = "finished"
        self.exitstatus = int(exitstatus)
        signal.signal(signal.SIGTERM, self.previous_handler or signal.SIG_DFL)
        self.save()

    def save(self) -> None:
        counts: dict[str, int] = {}
        for entry in self.tests.values():
            counts[entry["outcome"]] = counts.get(entry["outcome"], 0) + 1
        record = {"status": self.status, "exitstatus": self.exitstatus, "wall_s": round(time.time() - self.started, 1),
                  "counts": counts, "collect_errors": self.collect_errors, "tests": list(self.tests.values())}
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        os.replace(tmp, self.path)
        self.last_save = time.time()


def _outcome(report) -> str:
    if report.skipped:
        return "xfailed" if hasattr(report, "wasxfail") else "skipped"
    if report.failed:
        return "failed" if report.when == "call" else "error"
    return "passed"


def _message(report) -> str | None:
    if report.passed:
        return None
    if report.skipped:
        longrepr = report.longrepr
        return str(longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else longrepr)[:300]
    text = getattr(report, "longreprtext", "") or str(report.longrepr)
    return text[-MESSAGE_CHARS:]
