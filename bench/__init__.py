"""Benchmarks: commands that measure and print, never timed assertions in the test suite."""
