"""Benchmarks and long runs; run each from the repository root as a module,
e.g. `python3 -m scripts.bench_server --quick` (see tests/support/__init__.py)."""
