"""Tidemark benchmarks: `make bench` (CPU, bench/run.py) and `python -m bench.gpu` (GPU, no Ray)."""
