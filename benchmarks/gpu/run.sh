#!/usr/bin/env bash
# The prepared GPU run (docs/benchmarks.md, "The GPU run"): make unigraph importable from this
# checkout without a network, then run benchmarks/gpu/run.py, which verifies, tunes and
# benchmarks the Triton kernels within 8 minutes and writes at most 8 files into OUTDIR.
#
#   benchmarks/gpu/run.sh OUTDIR [--dry-run] [--steps tests,kernels] [--budget-scale 0.5]
#   benchmarks/gpu/run.sh OUTDIR --install-only   # only make unigraph importable, say how
#
# Environment: PYTHON (default python3: on the GPU machine the one that holds torch).
# Install, first that works (each bounded in time, none reaches a network):
#   1. nothing: unigraph already imports from this checkout (a developer's venv);
#   2. pip install --no-deps --no-build-isolation --no-index -e .  (a venv, or pip that may write there);
#   3. the same with --break-system-packages (a PEP 668 "externally managed" Python);
#   4. links unigraph/backends -> backends and unigraph/kernels -> kernels in this checkout (setup.py's
#      package-dir mapping, so `import unigraph` from the checkout needs no install; PYTHONPATH alone
#      cannot do it), removed again when the run ends.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
  echo "usage: benchmarks/gpu/run.sh OUTDIR [--dry-run] [--steps ...] [--budget-scale X]" >&2
  exit 2
fi
OUT="$1"; shift
PY="${PYTHON:-python3}"
WHOLE_BUDGET_S=470  # install + every step: within 8 minutes (run.py gets what the install left)
START=$SECONDS
mkdir -p "$OUT"
say() { echo "$(date +%H:%M:%S) +0.0s [install] $*" | tee -a "$OUT/run.log" >&2; }

# exit 0 when `import unigraph.backends` resolves into this checkout
from_here() {
  "$PY" - <<'EOF' 2>/dev/null
import pathlib, sys
import unigraph.backends, unigraph.kernels
here = pathlib.Path.cwd().resolve()
sys.exit(0 if pathlib.Path(unigraph.backends.__file__).resolve().is_relative_to(here) else 1)
EOF
}

LINKS=()
in_tree_links() {
  for name in backends kernels; do
    [ -e "unigraph/$name" ] && return 1  # never replace anything
    ln -s "../$name" "unigraph/$name" || return 1
    LINKS+=("unigraph/$name")
  done
  say "linked unigraph/backends and unigraph/kernels in the checkout (removed at the end)"
}
remove_links() { for link in "${LINKS[@]}"; do [ -L "$link" ] && rm -f "$link"; done; }
trap remove_links EXIT

PIP=("$PY" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation --no-index -e .)
if from_here; then
  say "unigraph already imports from this checkout"
elif timeout 60 "${PIP[@]}" >>"$OUT/run.log" 2>&1 && from_here; then
  say "installed with pip (editable, no network)"
elif timeout 60 "${PIP[@]}" --break-system-packages >>"$OUT/run.log" 2>&1 && from_here; then
  say "installed with pip --break-system-packages (editable, no network)"
elif in_tree_links && from_here; then
  say "pip could not install here: running from the checkout through the links"
else
  say "FAILED: unigraph cannot be imported from $PWD with $PY (see run.log)"
  exit 1
fi
say "$("$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>&1)"
if [ "${1:-}" = "--install-only" ]; then exit 0; fi  # the install alone (tests/test_gpu_run.py)
LEFT=$((WHOLE_BUDGET_S - (SECONDS - START)))
"$PY" -m benchmarks.gpu.run "$OUT" --total-budget-s "$LEFT" "$@"  # a --total-budget-s in "$@" wins
status=$?
remove_links
exit $status
