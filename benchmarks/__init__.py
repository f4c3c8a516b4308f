"""Benchmarks: kernel microbenchmarks, end-to-end epochs, sampling and scaling (see README)."""
