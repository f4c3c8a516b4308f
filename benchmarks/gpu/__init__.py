"""The prepared GPU run: ``benchmarks/gpu/run.sh OUTDIR`` (see :mod:`benchmarks.gpu.run`), its
steps (``step_*.py``), the summary and ``ingest`` (OUTDIR -> committed results)."""
