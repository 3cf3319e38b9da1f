"""Checksums of a benchmark's outcome and manifest files: ``<benchmark>/files.sha256``.

The file is in ``sha256sum`` format with paths relative to the benchmark folder (``outcomes/<run_id>.csv``,
``manifests/<run_id>.json``), so ``sha256sum --check files.sha256`` works there too. ``runs.csv`` keeps its own
sidecar (``runs.csv.sha256``); together the two cover every file a comparison or a report reads.

While a run's files are being replaced a path may be listed twice (old and new digest); either is accepted, as
with the runs table's sidecar.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping

from harness.errors import ResultsError
from harness.results.store.codec import ChecksumError, sha256_hex

REHASH_HINT = "check it, then run `harness results --rehash`"


_LINE = re.compile(r"([0-9a-f]{64})  ([^/].*)")


class FileSums:
    """Accepted digests per relative path."""

    def __init__(self, entries: Mapping[str, Iterable[str]] | None = None) -> None:
        self.entries: dict[str, tuple[str, ...]] = {p: tuple(dict.fromkeys(d)) for p, d in (entries or {}).items()}

    @classmethod
    def decode(cls, data: bytes, where: str) -> FileSums:
        """Parse ``sha256sum`` lines; a malformed line is a one-line error naming it."""
        return _decode(data, where)

    def encode(self) -> bytes:
        """The file's bytes: one line per (path, digest), sorted by path."""
        return "".join(f"{d}  {p}\n" for p in sorted(self.entries) for d in self.entries[p]).encode()

    def with_files(self, files: Mapping[str, bytes], *, keep_old: bool = False) -> FileSums:
        """A copy listing ``files`` (relative path -> bytes); ``keep_old`` also keeps their previous digests."""
        entries = dict(self.entries)
        for path, data in files.items():
            old = entries.get(path, ()) if keep_old else ()
            entries[path] = (*old, sha256_hex(data))
        return FileSums(entries)

    def settled(self) -> FileSums:
        """A copy with only the last digest of each path (after a write has finished)."""
        return FileSums({p: d[-1:] for p, d in self.entries.items()})

    def check(self, relpath: str, data: bytes, where: str, sums_where: str) -> None:
        """Raise a one-line :class:`ChecksumError` naming ``where`` unless ``data`` matches its listed digest."""
        digests = self.entries.get(relpath)
        if digests is None:
            raise ChecksumError(f"{where}: not listed in {sums_where} (not under checksum); {REHASH_HINT}")
        if sha256_hex(data) not in digests:
            raise ChecksumError(
                f"{where}: checksum mismatch with {sums_where} (truncated, corrupted or edited by hand); {REHASH_HINT}"
            )


@functools.lru_cache(maxsize=8)
def _decode(data: bytes, where: str) -> FileSums:
    entries: dict[str, list[str]] = {}
    for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        match = _LINE.fullmatch(line)
        if match is None or ".." in match[2].split("/"):
            raise ResultsError(f"{where}:{n}: not a sha256 checksum line")
        entries.setdefault(match[2], []).append(match[1])
    return FileSums(entries)
