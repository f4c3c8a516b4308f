"""``import unigraph`` (and ``unigraph --help``) import numba, triton, scipy, sympy and
torch._dynamo only when used; ``unigraph info`` says whether a peer can actually be imported."""
from __future__ import annotations

import subprocess
import sys

from conftest import REPO_ROOT

HEAVY = ("numba", "triton", "scipy", "sympy", "torch._dynamo", "torch_geometric", "dgl")


def test_import_loads_no_optional_heavy_module_until_used():
    probe = f"""
import sys
heavy = {HEAVY!r}
loaded = lambda: sorted(m for m in heavy if m in sys.modules)
import unigraph, unigraph.cli
unigraph.cli.build_parser()
print(loaded())
import torch
g = unigraph.Graph(torch.tensor([[0], [1]]), num_nodes=2)
unigraph.ops.gspmm(g, "copy_u", "sum", torch.ones(2, 3), backend="numba")
print(loaded())
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    after_import, after_numba_call = done.stdout.strip().splitlines()
    assert after_import == "[]", f"import unigraph (and building the CLI parser) imported {after_import}"
    assert "'numba'" in after_numba_call, "the numba backend imports numba when its kernels first run"


def test_info_says_whether_a_peer_imports(tmp_path, monkeypatch):
    from unigraph.backends import selector
    (tmp_path / "broken_peer").mkdir()
    (tmp_path / "broken_peer" / "__init__.py").write_text("raise ImportError('its C extension is missing')\n")
    (tmp_path / "fine_peer.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert selector._peer_statuses(("broken_peer", "fine_peer", "no_such_peer_here")) == {
        "broken_peer": "installed but cannot be imported: ImportError: its C extension is missing",
        "fine_peer": "installed, importable", "no_such_peer_here": "not installed"}
