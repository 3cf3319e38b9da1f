"""Crash-safe file writes: write a temporary file next to the target, fsync it, ``os.replace`` it over the target.

A reader sees either the old or the new content, never a mix; a failure (disk full, read-only folder, killed
process) leaves the old content in place and no temporary file behind. Operating-system errors become one-line
:class:`~harness.errors.ResultsError` messages that name the file.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from harness.errors import ResultsError


def describe_os_error(exc: OSError) -> str:
    """A short human reason for an ``OSError`` (``disk full``, ``read-only``, ``permission denied``...)."""
    reasons = {
        errno.ENOSPC: "disk full",
        errno.EDQUOT: "disk quota exceeded",
        errno.EROFS: "read-only file system",
        errno.EACCES: "permission denied (read-only folder?)",
        errno.EPERM: "operation not permitted",
        errno.EFBIG: "file too large",
    }
    return reasons.get(exc.errno or 0, exc.strerror or str(exc))


def ensure_dir(path: Path) -> None:
    """Create ``path`` and its parents, as a :class:`ResultsError` on failure."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ResultsError(f"{path}: cannot create folder: {describe_os_error(exc)}") from None


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, sync_dir: bool = True) -> None:
    """Replace ``path``'s content with ``data`` atomically and durably.

    ``sync_dir`` also fsyncs the folder so the rename itself survives a power loss before the next write.
    """
    ensure_dir(path.parent)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fdatasync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot write: {describe_os_error(exc)}; previous content unchanged") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    if sync_dir:
        _fsync_dir(path.parent)
