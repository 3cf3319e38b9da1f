"""Content digests of large files, remembered while the files are unchanged.

A run hashes its base checkpoint (hundreds of MB to GB) and the GGUF it was converted from, which reads every
byte each time. A digest is remembered in ``<cache>/digests.json`` together with each file's path, size, mtime,
ctime and inode, and reused only while all of them are unchanged (the test git uses for its index). Any write to
a file moves its ctime, which a user cannot set back, so an edited file is always hashed again. As in git, files
changed within the last few seconds are not remembered: a later edit within the same timestamp tick could
otherwise leave every stamp as it was.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.paths import cache_dir

DIGESTS_FILE = "digests.json"
MAX_ENTRIES = 256
RACY_S = 3.0


def _stamp(path: Path) -> list[Any]:
    st = path.stat()
    return [str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _load(store: Path) -> dict[str, Any]:
    try:
        data = json.loads(store.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(store: Path, data: dict[str, Any]) -> None:
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=store.parent, prefix=".digests-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, store)
    except OSError:  # a read-only cache only costs a re-hash next time
        return


def cached_digest(kind: str, files: Sequence[Path], compute: Callable[[], str], store: Path | None = None) -> str:
    """``compute()``, or the digest remembered for ``kind`` over exactly these unchanged ``files``."""
    store = store or cache_dir() / DIGESTS_FILE
    key = kind + ":" + "|".join(str(p.resolve()) for p in files)
    before = [_stamp(p) for p in files]
    entry = _load(store).get(key)
    if isinstance(entry, dict) and entry.get("stamps") == before and isinstance(entry.get("digest"), str):
        return str(entry["digest"])
    digest = compute()
    after = [_stamp(p) for p in files]
    newest_ns = max((max(s[2], s[3]) for s in after), default=0)
    if after != before or time.time_ns() - newest_ns < RACY_S * 1e9:
        return digest
    data = _load(store)  # re-read: another process may have added entries meanwhile
    data.pop(key, None)
    data[key] = {"stamps": after, "digest": digest}
    live = {k: v for k, v in data.items() if isinstance(v, dict) and _exists(v)}
    _save(store, dict(list(live.items())[-MAX_ENTRIES:]))
    return digest


def _exists(entry: dict[str, Any]) -> bool:
    stamps = entry.get("stamps")
    return isinstance(stamps, list) and all(isinstance(s, list) and s and Path(s[0]).exists() for s in stamps)
