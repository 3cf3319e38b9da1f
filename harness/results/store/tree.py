"""Read access to a result store's files, either in a folder or at a git revision (without checkout).

Both implement :class:`Tree`: paths are POSIX and relative to the store root (``<benchmark>/runs.csv``...).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from harness.errors import ResultsError
from harness.results.store import git
from harness.results.store.atomic import describe_os_error


class Tree(Protocol):
    """Files of a result store."""

    def where(self, relpath: str) -> str:
        """How ``relpath`` is named in error messages."""
        ...

    def read(self, relpath: str) -> bytes | None:
        """The file's bytes, or ``None`` when it does not exist."""
        ...

    def read_many(self, relpaths: Sequence[str]) -> dict[str, bytes | None]:
        """Several files at once (``None`` for missing ones)."""
        ...

    def folders(self) -> list[str]:
        """Top-level folder names (benchmark candidates), sorted."""
        ...


class FsTree:
    """A result store in a folder of the working tree."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def where(self, relpath: str) -> str:
        """The file's path."""
        return str(self.root / relpath)

    def read(self, relpath: str) -> bytes | None:
        """Read one file."""
        path = self.root / relpath
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ResultsError(f"{path}: cannot read: {describe_os_error(exc)}") from None

    def read_many(self, relpaths: Sequence[str]) -> dict[str, bytes | None]:
        """Read several files."""
        return {p: self.read(p) for p in relpaths}

    def folders(self) -> list[str]:
        """Sub-folders of the root."""
        try:
            return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ResultsError(f"{self.root}: cannot list: {describe_os_error(exc)}") from None


class GitTree:
    """A result store as committed at a git revision, read with ``git cat-file`` (no checkout)."""

    def __init__(self, root: Path, rev: str) -> None:
        self.top, self.prefix = git.repo_location(root)
        self.rev = rev
        self.commit = git.resolve_commit(self.top, rev)

    def _full(self, relpath: str) -> str:
        return f"{self.prefix}/{relpath}" if self.prefix else relpath

    def where(self, relpath: str) -> str:
        """``REV:path`` as git names it."""
        return f"{self.rev}:{self._full(relpath)}"

    def read(self, relpath: str) -> bytes | None:
        """Read one file at the revision."""
        return self.read_many([relpath])[relpath]

    def read_many(self, relpaths: Sequence[str]) -> dict[str, bytes | None]:
        """Read several files at the revision with one git process."""
        found = git.cat_files(self.top, self.commit, [self._full(p) for p in relpaths])
        return {p: found[self._full(p)] for p in relpaths}

    def folders(self) -> list[str]:
        """Sub-folders of the store root at the revision."""
        return [name for name in git.list_dir(self.top, self.commit, self.prefix) if not name.startswith(".")]
