"""Tool servers the benchmarks' agents use."""
