"""Statistics, one module for each question, shared by rows, manifests, compare and report.

``aggregate`` (outcomes -> per-task counts), ``estimators`` (intervals, paired tests, pass^k), ``summary`` (the one
pass rate / interval path), ``paired`` (B - A over paired tasks and its interval), ``agreement`` (does a
reproduction agree).
"""
