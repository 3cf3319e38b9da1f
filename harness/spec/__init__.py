"""Stage 1, the spec: what to run, as a typed schema loaded from ``benchmarks/<name>/spec.yaml``.

``schema`` holds the pydantic models (every YAML key a typed field, unknown keys refused), ``loading`` merges a
profile over the base and validates it, ``parse`` reads the YAML and words every error as one line naming the file
and the key. Nothing here knows the engines: an engine validates its own ``training.config`` (:mod:`harness.engines`).
"""
