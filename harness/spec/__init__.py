"""Stage 2, the spec: what to run, as a typed schema loaded from ``benchmarks/<name>/spec.yaml``.

``schema`` holds the pydantic models (every YAML key a typed field, unknown keys refused), ``loading`` merges a
profile over the base and validates it, ``parse`` reads the YAML and words every error as one line naming the file
and the key, ``options`` types what a run is asked beyond its spec. Nothing here knows the engines: an engine
validates its own ``training.config`` (:mod:`harness.engines`).
"""

from harness.spec.loading import default_profile, load_spec, profile_names, resolve, spec_hash
from harness.spec.schema import BenchmarkSpec, DatasetFile, DatasetSpec, ModelSpec, ServingSpec

__all__ = [
    "BenchmarkSpec",
    "DatasetFile",
    "DatasetSpec",
    "ModelSpec",
    "ServingSpec",
    "default_profile",
    "load_spec",
    "profile_names",
    "resolve",
    "spec_hash",
]
