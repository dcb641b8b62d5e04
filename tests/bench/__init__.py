"""Tests of the benchmarks' own measuring parts (bench/ is not a package: loaded by path)."""
