"""Read-only git plumbing: resolve revisions, read files at a revision without checkout, order commits.

Every call runs ``git`` as a subprocess with a fixed argument list (no shell). Problems the user can fix (not a
git repository, unknown revision) are raised as one-line :class:`~harness.errors.ResultsError`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from harness.errors import ResultsError


def run_git(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """Run ``git -C cwd args...`` and return stdout; a failure raises :class:`ResultsError` with git's message."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(cwd), *args], input=stdin, capture_output=True, check=False, timeout=300
        )
    except FileNotFoundError:
        raise ResultsError("git is not installed; comparing revisions needs git") from None
    except subprocess.TimeoutExpired:
        raise ResultsError(f"git {' '.join(args)}: timed out") from None
    if proc.returncode != 0:
        message = proc.stderr.decode(errors="replace").strip().splitlines()
        raise ResultsError(f"git {' '.join(args)}: {message[-1] if message else f'exit {proc.returncode}'}")
    return proc.stdout


def _existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.is_dir() and path != path.parent:
        path = path.parent
    return path


def repo_location(root: Path) -> tuple[Path, str]:
    """The top level of the git work tree holding ``root`` and ``root``'s path inside it (POSIX, ``""`` at top)."""
    start = _existing_ancestor(root)
    try:
        top = Path(run_git(start, "rev-parse", "--show-toplevel").decode().strip())
    except ResultsError:
        raise ResultsError(f"{root}: not inside a git repository; git revisions cannot be read") from None
    try:
        rel = root.absolute().resolve().relative_to(top.resolve())
    except ValueError:
        raise ResultsError(f"{root}: not inside the git repository at {top}") from None
    return top, rel.as_posix() if str(rel) != "." else ""


def resolve_commit(top: Path, rev: str) -> str:
    """The full sha of commit ``rev``; an unknown revision is a one-line :class:`ResultsError`."""
    if not rev or rev.startswith("-"):
        raise ResultsError(f"bad revision {rev!r}")
    try:
        out = run_git(top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    except ResultsError:
        raise ResultsError(f"unknown git revision {rev!r} in {top}") from None
    return out.decode().strip()


def cat_files(top: Path, commit: str, paths: Sequence[str]) -> dict[str, bytes | None]:
    """Contents of ``paths`` (relative to the repository top) at ``commit``; ``None`` for a path not there.

    One ``git cat-file --batch`` process for all paths, so reading a thousand small files stays cheap.
    """
    if not paths:
        return {}
    if any("\n" in p for p in paths):
        raise ResultsError("file names with newlines cannot be read from git")
    request = "".join(f"{commit}:{p}\n" for p in paths).encode()
    out = run_git(top, "cat-file", "--batch", stdin=request)
    result: dict[str, bytes | None] = {}
    pos = 0
    for path in paths:
        end = out.index(b"\n", pos)
        header = out[pos:end].decode(errors="replace").split()
        pos = end + 1
        if len(header) == 3 and header[2].isdigit():
            size = int(header[2])
            body = out[pos : pos + size]
            pos += size + 1
            result[path] = body if header[1] == "blob" else None
        else:  # "<name> missing" or "<name> ambiguous"
            result[path] = None
    return result


def list_dir(top: Path, commit: str, path: str) -> list[str]:
    """Names of the sub-folders of ``path`` at ``commit`` (empty when ``path`` is absent)."""
    spec = f"{path}/" if path else "."
    out = run_git(top, "ls-tree", "-d", "--name-only", "--end-of-options", commit, "--", spec)
    return sorted(line.rsplit("/", 1)[-1] for line in out.decode().splitlines() if line)


def commit_order(top: Path) -> dict[str, int]:
    """Position of every commit reachable from any ref, oldest first (topological), keyed by full sha."""
    out = run_git(top, "rev-list", "--topo-order", "--reverse", "--all")
    return {sha: i for i, sha in enumerate(out.decode().split())}
