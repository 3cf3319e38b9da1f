"""The checker child's file system: read-only everywhere but its scratch folder.

The checker child is started in a mount namespace of its own (``unshare --mount``, in a user namespace where it is
not root: ``checker.py``). There, before it imports BFCL, :func:`confine` bind-mounts the scratch folder onto
itself and then remounts every other mount of its namespace read-only (``mount(2)`` with ``MS_REMOUNT | MS_BIND |
MS_RDONLY``, keeping each mount's locked flags). Writing anywhere else fails with "Read-only file system", whatever
runs in the child. The mounts of the rest of the machine are not touched: the namespace's mounts are private copies,
and :func:`confine` refuses to run in the mount namespace it was started from.

Where the machine gives no mount namespace (no ``unshare``, user namespaces disabled, a container without the
right), the child runs unconfined and says so; its other limits stay (no network where possible, an address-space
limit, a time limit per request, a scratch working folder and ``HOME``).

Standard library only: runs in BFCL's environment.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_BIND = 0x1000
MS_RELATIME = 0x200000
MS_STRICTATIME = 0x1000000
_FLAGS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}


def _unescape(field: str) -> str:
    """Mount points in ``mountinfo`` write space, tab, newline and backslash as octal escapes."""
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def mounts() -> list[tuple[str, int]]:
    """(mount point, per-mount flags) of every mount of this process's namespace, as ``mountinfo`` lists them."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        flags = 0
        for option in fields[5].split(","):
            flags |= _FLAGS.get(option, 0)
        out.append((_unescape(fields[4]), flags))
    return out


def _mount(libc: ctypes.CDLL, source: str | None, target: str, flags: int) -> int:
    src = source.encode() if source is not None else None
    if libc.mount(src, target.encode(), None, ctypes.c_ulong(flags), None) != 0:
        return ctypes.get_errno()
    return 0


def confine(scratch: Path, started_from: str) -> str:
    """Make every mount read-only but ``scratch``; return a line saying what holds. ``started_from`` is the mount
    namespace of the process that started this one (``/proc/self/ns/mnt`` there): in it, nothing is changed."""
    try:
        here = os.readlink("/proc/self/ns/mnt")
    except OSError as exc:
        return f"not confined: the mount namespace cannot be read ({exc.strerror})"
    if not started_from or here == started_from:
        return "not confined: no mount namespace of its own"
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    target = str(scratch.resolve())
    if (err := _mount(libc, target, target, MS_BIND)) != 0:
        return f"not confined: the scratch folder cannot be bind-mounted ({os.strerror(err)})"
    writable = []
    for point, flags in mounts():
        if point == target:
            continue  # the bind mount (a remount by path reaches the topmost mount there): stays writable
        if _mount(libc, None, point, MS_REMOUNT | MS_BIND | MS_RDONLY | flags) != 0:
            writable.append(point)
    probe = Path(target) / ".confine-probe"
    try:
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        return f"not confined: the scratch folder is not writable after confining ({exc.strerror})"
    if writable:
        return f"partly confined: read-only but the scratch folder and {', '.join(sorted(writable)[:5])}"
    return "confined: the file system is read-only but the scratch folder"
