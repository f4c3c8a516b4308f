#!/usr/bin/env bash
# Every committed benchmark result, in sequence (docs/benchmarks.md, "Regenerating the committed results").
#
#   benchmarks/run_all.sh --quick          # smoke run of every step (minutes), into benchmarks/results/scratch/run_all-quick
#   benchmarks/run_all.sh                  # full run into benchmarks/results/scratch/run_all (nothing committed is touched)
#   benchmarks/run_all.sh --out DIR        # full run into DIR
#   benchmarks/run_all.sh --commit         # full run replacing benchmarks/results/* and the fitted cost-model constants
#   ... --only kernels,selector            # a subset of the steps: kernels selector target planetoid arxiv allocator minibatch sampling small_batches scaling ports
#
# Run it on an otherwise idle machine (uptime's load average near 0; every file records it).
# A full run takes ~5-7 h on the 2-core, 24 GiB CPU machine and peaks at ~20 GiB (the mini-batch
# step); the table in docs/benchmarks.md gives each step's time and memory.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && PY=.venv/bin/python
ROOT=${PLANETOID_ROOT:-../shared/datasets/planetoid/raw}
COMMITTED=benchmarks/results
QUICK=0 COMMIT=0 OUT="" ONLY="kernels,selector,target,planetoid,arxiv,allocator,minibatch,sampling,small_batches,scaling,ports"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --commit) COMMIT=1 ;;
    --out) OUT="$2"; shift ;;
    --only) ONLY="$2"; shift ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) echo "run_all.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$QUICK" = 1 ] && { [ "$COMMIT" = 1 ] || [ -n "$OUT" ]; }; then
  echo "run_all.sh: --quick writes smoke figures to benchmarks/results/scratch only (no --commit, no --out)" >&2; exit 2
fi
if [ "$COMMIT" = 1 ] && [ -n "$OUT" ]; then echo "run_all.sh: give --commit or --out, not both" >&2; exit 2; fi
if [ "$COMMIT" = 1 ]; then OUT=$COMMITTED
elif [ -z "$OUT" ]; then OUT=$COMMITTED/scratch/run_all$([ "$QUICK" = 1 ] && echo -quick || true); fi
mkdir -p "$OUT"
Q=(); [ "$QUICK" = 1 ] && Q=(--quick)
step() { case ",$ONLY," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
say() { echo; echo "=== $* ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?'))"; }
outarg() { echo --out "$OUT"; }

if step kernels; then
  say "kernel suite: the cost model's fit set (5,000 nodes, uniform + R-MAT), its launch-cost run (64 nodes) and its 100,000-node run"
  $PY benchmarks/kernels.py --threads 2 "${Q[@]}" $(outarg)
  $PY benchmarks/kernels.py --threads 2 --nodes 64 --degrees 1 4 --widths 16 --name kernels_cpu_tiny $(outarg) \
    $([ "$QUICK" = 1 ] && echo "--repeats 1 --min-run-ms 0")
  # 100,000 nodes: rows past L2, where the 5,000-node rates alone mis-order the backends (cost_fit.FIT_SET)
  $PY benchmarks/kernels.py --threads 2 --nodes "$([ "$QUICK" = 1 ] && echo 3000 || echo 100000)" --degrees 4 16 \
    --widths 16 64 --modes fwd fwd+bwd --peers --repeats 5 --budget 400000000 --name kernels_cpu_large $(outarg) \
    $([ "$QUICK" = 1 ] && echo "--repeats 1 --min-run-ms 0 --degrees 4 --widths 16")
  if [ "$COMMIT" = 1 ]; then
    say "cost model: refit from the new fit set, rewrite backends/cost_constants_cpu.json"
    $PY benchmarks/kernels.py --fit --commit
  else
    say "cost model: refit from this run's fit set (compared with the committed constants; written to scratch if different)"
    $PY benchmarks/kernels.py --fit "$OUT/kernels_cpu.json" "$OUT/kernels_cpu_tiny.json" "$OUT/kernels_cpu_large.json"
  fi
  $PY -m unigraph.benchmarking.cost_fit --crossval "$OUT/kernels_cpu.json" "$OUT/kernels_cpu_tiny.json" \
    "$OUT/kernels_cpu_large.json" \
    --write "$OUT/selector_crossval_cpu.md"
fi

if step selector; then
  say "selector held out: Cora, CiteSeer, the arxiv-sized graph and its uniform twin, every backend, auto's regret"
  if [ "$QUICK" = 1 ]; then SOURCES=(planetoid:cora:$ROOT arxiv_like:3000:14 uniform:3000:14)
  else SOURCES=(planetoid:cora:$ROOT planetoid:citeseer:$ROOT arxiv_like:169343:14 uniform:169343:14); fi
  # unigraph's backends only (--peers with none): the regret is auto's against them; the peers are timed in the kernel suites
  $PY benchmarks/kernels.py --threads 2 --sources "${SOURCES[@]}" --widths 16 64 --budget 400000000 --peers --repeats 5 \
    --name selector_heldout_cpu $(outarg) $([ "$QUICK" = 1 ] && echo "--repeats 1 --min-run-ms 0 --ops copy_u/sum gat")
  $PY -m unigraph.benchmarking.cost_fit --score "$OUT/selector_heldout_cpu.json" --write "$OUT/selector_heldout_cpu_regret.md"
fi

if step target; then
  say "kernel targets: copy_u/sum at 20,000 nodes beside DGL and the bandwidth floor"
  $PY benchmarks/kernels.py --nodes "$([ "$QUICK" = 1 ] && echo 2000 || echo 20000)" --degrees 2 8 32 128 --widths 64 \
    --ops copy_u/sum --modes fwd+bwd --graphs uniform rmat --threads 2 --budget 400000000 --name kernels_cpu_target \
    $(outarg) $([ "$QUICK" = 1 ] && echo "--repeats 1 --min-run-ms 0")
fi

for part in planetoid arxiv minibatch; do
  if step $part; then
    say "end to end: $part"
    extra=(); [ "$part" = minibatch ] && [ "$QUICK" = 0 ] && extra=(--mb-epochs 2)
    $PY benchmarks/e2e.py --parts $part --root "$ROOT" "${Q[@]}" "${extra[@]}" $(outarg)
  fi
done

if step allocator; then
  say "allocator: the arxiv GraphSAGE comparison with glibc's default malloc and with freed memory kept"
  $PY benchmarks/allocator.py $([ "$QUICK" = 1 ] && echo "--quick --scale 0.01 --epochs 3 --warmup 1" || echo "--model sage --epochs 10 --warmup 2") $(outarg)
fi
if step sampling; then say "sampling"; $PY benchmarks/sampling.py "${Q[@]}" $(outarg); fi
if step small_batches; then say "small batches: each layer alone on PyG's batches, beside PyG's"; $PY benchmarks/small_batches.py "${Q[@]}" $(outarg); fi
if step scaling; then say "scaling: data parallel vs one process on all cores, pipeline"; $PY benchmarks/scaling.py "${Q[@]}" $(outarg); fi
if step ports; then say "ports: PyG's and DGL's example scripts with their layers and unigraph's"; $PY benchmarks/ports.py "${Q[@]}" --root "$ROOT" $(outarg); fi

say "done: results in $OUT"
