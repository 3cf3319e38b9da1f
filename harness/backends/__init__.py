"""Stage 5, backends: where the run's processes (model servers, trainers, tool servers) run.

``base`` (the Backend interface), ``local`` (subprocesses in the ``make env`` environments), ``docker`` (containers
of the pinned images), ``images`` (which images a Docker run uses), ``tools`` (the run's tool servers started on
its backend). A new backend is a module with a class registered by ``register_backend``, imported in
:func:`_load_builtin`.
"""

from __future__ import annotations

from typing import Any

from harness.backends.base import BACKENDS, Backend, Handle, LaunchSpec, register_backend


def _load_builtin() -> None:
    from harness.backends import local  # noqa: F401  (registers)

    try:
        from harness.backends import docker  # noqa: F401
    except ImportError:  # the Docker SDK is optional
        pass


BACKENDS.load = _load_builtin


def backend_names() -> list[str]:
    return BACKENDS.names()


def backend_class(name: str) -> type[Backend]:
    return BACKENDS.get(name)


def get_backend(name: str, **kwargs: Any) -> Backend:
    backend: Backend = BACKENDS.get(name)(**kwargs)
    return backend


__all__ = ["Backend", "Handle", "LaunchSpec", "backend_class", "backend_names", "get_backend", "register_backend"]
