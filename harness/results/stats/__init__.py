"""Statistics, one module for each question, shared by rows, manifests, compare and report.

``aggregate`` (outcomes -> per-task counts), ``estimators`` (intervals, paired tests, pass^k), ``summary`` (the one
pass rate / interval path), ``paired`` (B - A over paired tasks and its interval), ``agreement`` (does a
reproduction agree), ``seeds`` (training seeds as the units: the permutation test over seeds, the between-seed
spread), ``power`` (the smallest gain a design detects, simulated with its own test), ``batched`` (those tests on
many simulated data sets at once).
"""
