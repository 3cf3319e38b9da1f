"""One registry pattern for everything the harness finds by name (benchmarks, engines, backends).

A class registers itself with a decorator, under its ``name`` class attribute (or the key a registry derives from
the class: a benchmark is found by the module of its entrypoint file, and named by its folder). Registering a
different class under a key already taken is an error (the same class imported twice, or from a copy of its file,
is not); looking up an unknown name is one line that lists the known ones and suggests the closest.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

T = TypeVar("T", bound=type[Any])


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``; did you mean 'x'?`` for the choice closest to ``name``, or nothing when none is close."""
    hint = difflib.get_close_matches(name, list(choices), n=1)
    return f"; did you mean {hint[0]!r}?" if hint else ""


def _name_attribute(cls: Any) -> Any:
    return getattr(cls, "name", None)


class Registry(Generic[T]):
    def __init__(
        self,
        kind: str,
        error: type[Exception],
        load: Callable[[], None] | None = None,
        key: Callable[[T], str] = _name_attribute,
    ) -> None:
        self.kind = kind
        self.error = error
        self.load = load
        """Imports the built-in implementations (they register themselves); run before the first lookup."""
        self.key = key
        """A class's key (default: its ``name`` attribute)."""
        self._classes: dict[str, T] = {}

    def register(self, cls: T) -> T:
        """Class decorator."""
        name = self.key(cls)
        if not isinstance(name, str) or not name:
            raise self.error(f"{getattr(cls, '__name__', cls)}: a {self.kind} class needs a `name` string")
        known = self._classes.get(name)
        if known is not None and known.__qualname__ != cls.__qualname__:
            raise self.error(f"{self.kind} {name!r} is registered twice ({known.__qualname__}, {cls.__qualname__})")
        self._classes[name] = cls
        return cls

    def _loaded(self) -> dict[str, T]:
        if self.load is not None:
            load, self.load = self.load, None
            load()
        return self._classes

    def find(self, name: str) -> T | None:
        """The class registered under ``name``, or None."""
        return self._loaded().get(name)

    def names(self) -> list[str]:
        return sorted(self._loaded())

    def get(self, name: str) -> T:
        classes = self._loaded()
        if name not in classes:
            hint = did_you_mean(name, classes)
            raise self.error(f"unknown {self.kind} {name!r}{hint} ({self.kind}s: {', '.join(sorted(classes))})")
        return classes[name]
