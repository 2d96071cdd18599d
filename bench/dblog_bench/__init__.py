"""dblog_bench: the parts of bench/bench.py (harness, workloads, sections, report, targets); the
module docstring of bench/bench.py says which part owns what."""
