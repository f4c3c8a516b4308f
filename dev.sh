#!/usr/bin/env bash
# unigraph's entry point on a fresh machine (only Python and the local torch wheel needed).
#
#   ./dev.sh demo     set up .venv, then train GAT on the built-in synthetic graph (no download)
#   ./dev.sh test     set up .venv, then run the default test suite (what CI runs)
#   ./dev.sh setup    only set up .venv
#   ./dev.sh gpu OUT  the prepared GPU run (benchmarks/gpu/run.sh OUT ...; no set-up: the GPU machine
#                     has torch and no network)
#
# Set-up is idempotent: it re-installs only when pyproject.toml or this file changed.
# Environment: UNIGRAPH_VENV (default .venv), UNIGRAPH_TORCH (default torch==2.13.0, the local
# CPU wheel; a bare `torch` would pull several GB of CUDA packages), UNIGRAPH_WHEELS (prebuilt
# torch-scatter/torch-sparse wheels, default ../shared/wheels; without them unigraph uses
# torch-native kernels and says so in `unigraph info`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

VENV="${UNIGRAPH_VENV:-.venv}"
TORCH_SPEC="${UNIGRAPH_TORCH:-torch==2.13.0}"
WHEELS="${UNIGRAPH_WHEELS:-../shared/wheels}"
PY="$VENV/bin/python"

say() { echo "[dev.sh] $*" >&2; }

setup() {
  [ -x "$PY" ] || { say "creating $VENV"; python3 -m venv "$VENV"; }
  local stamp="$VENV/.unigraph-setup-$(cat pyproject.toml setup.py dev.sh | sha1sum | cut -c1-12)"
  [ -f "$stamp" ] && return 0
  local pip=("$PY" -m pip install --quiet --disable-pip-version-check --prefer-binary)
  say "installing $TORCH_SPEC first (pinned: see the header of this file)"
  "${pip[@]}" "$TORCH_SPEC"
  if [ -d "$WHEELS" ]; then
    say "installing torch-scatter and torch-sparse from $WHEELS"
    "${pip[@]}" --find-links "$WHEELS" torch-scatter torch-sparse
  else
    say "no prebuilt wheels at $WHEELS: skipping torch-scatter/torch-sparse (torch-native kernels will be used)"
  fi
  say "installing unigraph (editable) with its test, cpu, triton, bench and partition extras"
  "${pip[@]}" -e ".[test,cpu,triton,bench,partition]"
  say "installing DGL 2.1.0 as an optional peer (--no-deps: its pins would replace torch)"
  if "${pip[@]}" --no-deps dgl==2.1.0 && "${pip[@]}" -e ".[dgl]"; then :; else
    say "DGL could not be installed; tests and benchmarks that compare with DGL will skip"
  fi
  # numba compiles each kernel on its first call (seconds each): compile the common ones now, once
  say "compiling the CPU kernels (unigraph precompile: ~1.5 min once; numba's cache keeps them)"
  "$VENV/bin/unigraph" precompile || say "precompile failed: the kernels will compile on first use"
  rm -f "$VENV"/.unigraph-setup-*
  touch "$stamp"
}

case "${1:-}" in
  setup) setup ;;
  demo) setup; shift; exec "$VENV/bin/unigraph" train "$@" ;;
  test) setup; shift; exec "$PY" -m pytest -q "$@" ;;
  gpu) shift; exec benchmarks/gpu/run.sh "$@" ;;
  *) echo "usage: ./dev.sh {demo|test|setup|gpu} [extra arguments]" >&2; exit 2 ;;
esac
