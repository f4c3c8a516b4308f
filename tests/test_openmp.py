"""unigraph/_openmp.py: importing unigraph sets OMP_WAIT_POLICY=PASSIVE unless it is set, and
benchmark reports say the policy libgomp actually read (once, when torch loaded), not what the
variable says afterwards. Each case in a fresh interpreter (the policy is read at load)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

REPORT = ("from unigraph import _openmp; import os; "
          "print(repr(os.environ.get('OMP_WAIT_POLICY')) + '|' + _openmp.wait_policy_in_effect())")


def _run(first: str, policy: str | None) -> tuple[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    code = f"import {first}; import torch, unigraph; {REPORT}"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    variable, effect = out.stdout.strip().splitlines()[-1].split("|", 1)
    return variable, effect


@pytest.mark.parametrize("first, policy, variable, effect", [
    ("unigraph", None, "'PASSIVE'", "PASSIVE"),                  # set before torch loaded libgomp
    ("torch", None, "'PASSIVE'", "unset: libgomp's default, spin then sleep (the environment says "
                                 "'PASSIVE', set after torch loaded: not in effect)"),
    ("torch", "ACTIVE", "'ACTIVE'", "ACTIVE"),                   # an explicit setting wins, in any order
    ("unigraph", "ACTIVE", "'ACTIVE'", "ACTIVE"),
])
def test_the_wait_policy_in_effect_is_the_one_libgomp_read(first, policy, variable, effect):
    assert _run(first, policy) == (variable, effect)
