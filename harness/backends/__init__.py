"""Where processes run: local subprocesses, or containers of the pinned images (Docker)."""

from __future__ import annotations

from harness.backends.base import Backend, Handle, LaunchSpec, get_backend, register_backend

__all__ = ["Backend", "Handle", "LaunchSpec", "get_backend", "register_backend"]
