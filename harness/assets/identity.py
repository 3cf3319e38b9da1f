"""A checkpoint's identity: a hash of what the model *is*, not of how a library version wrote it.

The digest covers, in a fixed order:

- every tensor of every ``*.safetensors`` file: name, dtype, shape and bytes (not the file layout, its metadata or
  how tensors are split over shards);
- the JSON files (config, generation config, tokenizer), parsed and written back with sorted keys,
  without the keys that only say which library version wrote them or how they were loaded (:data:`WRITER_KEYS`),
  and with the ``torch_dtype`` / ``dtype`` spelling unified;
- the chat template text, wherever the writer put it (``chat_template.jinja`` or inside ``tokenizer_config.json``).

The harness's own records beside the weights (``harness-*.json``: where the model came from, how it was trained)
are provenance, not the model, and are left out. So the same weights, tokenizer and template converted by two
transformers versions get one hash, and a changed tensor byte, config value, token or template line gets another.
Digests are remembered while the files are unchanged (:mod:`harness.assets.digests`).
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

from harness.assets.digests import cached_digest
from harness.errors import ModelError

IDENTITY_VERSION = 2
"""Bumped whenever the digest's definition changes (the remembered digests are keyed by it)."""
WRITER_KEYS = frozenset({"transformers_version", "is_local", "local_files_only", "_commit_hash"})
"""Keys that say which library version wrote a file, or how it was loaded, not what the model is."""
HASHED_SUFFIXES = (".safetensors", ".json", ".jinja")
SKIPPED_JSON = frozenset({"model.safetensors.index.json"})  # the shard layout, not the model


def _tensor_index(path: Path) -> tuple[int, dict[str, Any]]:
    """The safetensors header: (offset of the data section, {tensor name: entry})."""
    try:
        with path.open("rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            if size > 100 << 20:
                raise ValueError("header too large")
            header = json.loads(f.read(size))
    except (OSError, struct.error, ValueError) as exc:
        raise ModelError(f"{path}: not a safetensors file ({exc})") from None
    header.pop("__metadata__", None)
    return 8 + size, header


def _canonical_json(path: Path) -> bytes:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path}: unreadable JSON ({exc})") from None
    if isinstance(data, dict):
        for key in WRITER_KEYS:
            data.pop(key, None)
        if "torch_dtype" in data and "dtype" not in data:
            data["dtype"] = data.pop("torch_dtype")
        data.pop("chat_template", None)  # hashed on its own, wherever it is stored
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def chat_template_text(folder: Path) -> str:
    """The checkpoint's chat template: ``chat_template.jinja``, else the one in ``tokenizer_config.json``."""
    jinja = folder / "chat_template.jinja"
    if jinja.exists():
        return jinja.read_text(encoding="utf-8")
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    template = config.get("chat_template") if isinstance(config, dict) else None
    return template if isinstance(template, str) else ""


def _digest(folder: Path, files: list[Path]) -> str:
    h = hashlib.sha256(f"model-identity-v{IDENTITY_VERSION}\0".encode())
    tensors: dict[str, tuple[Path, int, dict[str, Any]]] = {}
    for path in files:
        if path.suffix != ".safetensors":
            continue
        base, header = _tensor_index(path)
        for name, entry in header.items():
            if name in tensors:
                raise ModelError(f"{folder}: tensor {name!r} is stored twice")
            tensors[name] = (path, base, entry)
    for name in sorted(tensors):
        path, base, entry = tensors[name]
        start, end = entry["data_offsets"]
        h.update(f"tensor\0{name}\0{entry['dtype']}\0{entry['shape']}\0".encode())
        with path.open("rb") as f:
            f.seek(base + start)
            left = end - start
            while left > 0:
                block = f.read(min(left, 1 << 22))
                if not block:
                    raise ModelError(f"{path}: truncated tensor {name!r}")
                h.update(block)
                left -= len(block)
    for path in files:
        if path.suffix == ".json" and path.name not in SKIPPED_JSON and not path.name.startswith("harness-"):
            h.update(f"json\0{path.name}\0".encode() + _canonical_json(path))
    h.update(b"chat_template\0" + chat_template_text(folder).encode())
    return h.hexdigest()


def checkpoint_hash(path: Path) -> str:
    """The identity digest of the checkpoint folder ``path`` (see the module docstring)."""
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in HASHED_SUFFIXES)
    if not any(p.suffix == ".safetensors" for p in files):
        raise ModelError(f"{path}: no .safetensors weights in checkpoint")
    return cached_digest(f"checkpoint-v{IDENTITY_VERSION}", files, lambda: _digest(path, files))
