"""Benchmarks: scripts that print a table (``python -m benchmarks.<name>``); not timed tests."""
