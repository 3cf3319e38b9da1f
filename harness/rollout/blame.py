"""Whose exception is it: the agent's (a failed sample) or the benchmark's own code (a failed run)?

A rollout drives an agent library against a model. When the model misbehaves, the library raises (a malformed tool
call, too many turns, a request the server refuses): that sample failed, and it counts as a failure in the pass
rate. When the benchmark's own code raises (a ``KeyError`` in its scoring, a wrong attribute), every sample would
fail the same way and the pass rate would measure the bug: the run must stop and say where.

The raise site decides. Walking the traceback from the innermost frame outwards, frames of the standard library
are skipped; the first other frame belongs either to the harness or the benchmark (its folder, or a module the
harness loaded for it) — the benchmark's code raised — or to a third-party package, which raised on the agent's
behalf. A benchmark that means an agent failure from its own code raises :class:`AgentFailure`
(:mod:`harness.benchmark`).

The rule cannot tell a library rejecting the agent's output from a library rejecting the benchmark's own input (a
pydantic model built from a malformed task row): both count as the agent's. Validate task data in ``tasks()``,
where an exception stops the run before any rollout. The harness's own records are the exception: where pydantic
refuses a value for one of them (an :class:`~harness.benchmark.Episode` with an unknown field, or an answer that is
not text), the raise site is the code that built the record, so the bug is the benchmark's.
"""

from __future__ import annotations

import sys
import sysconfig
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Literal

from pydantic import BaseModel, ValidationError

from harness.benchmark.protocol import AgentFailure
from harness.errors import HarnessError, RunFailure
from harness.records import first_error

_HARNESS_ROOT = Path(__file__).resolve().parent
_STDLIB = Path(sysconfig.get_paths()["stdlib"]).resolve()


class BenchmarkCodeError(RunFailure):
    """The benchmark's own code raised during a rollout: the run fails, naming the file and line."""


@dataclass(frozen=True)
class RaiseSite:
    file: str
    line: int
    function: str
    ours: bool
    """The harness's or the benchmark's code (as opposed to a third-party package's)."""


def _is_stdlib(path: Path, module: str) -> bool:
    top = module.partition(".")[0]
    if top in sys.stdlib_module_names:
        return True
    if str(path).startswith("<"):  # <frozen ...>, <string>
        return True
    return path.is_relative_to(_STDLIB) and not {"site-packages", "dist-packages"} & set(path.parts)


def _is_ours(path: Path, module: str, folder: Path | None) -> bool:
    if module == "harness" or module.startswith(("harness.", "harness_benchmark_")):
        return True
    if path.is_relative_to(_HARNESS_ROOT):
        return True
    return folder is not None and path.is_relative_to(folder)


def _builds_harness_record(frame: FrameType, module: str) -> bool:
    """A frame of pydantic building (or validating) one of the harness's own models."""
    if module != "pydantic" and not module.startswith("pydantic."):
        return False
    target = frame.f_locals.get("self", frame.f_locals.get("cls"))
    model = target if isinstance(target, type) else type(target)
    return issubclass(model, BaseModel) and model.__module__.startswith("harness.")


def raise_site(exc: BaseException, folder: Path | None = None) -> RaiseSite | None:
    """The innermost frame of ``exc``'s traceback outside the standard library (and outside pydantic where it
    builds one of the harness's records), or None without one."""
    folder = folder.resolve() if folder is not None else None
    frames: list[tuple[TracebackType, Path, str]] = []
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        path = Path(code.co_filename)
        if not str(path).startswith("<"):
            path = path.resolve()
        frames.append((tb, path, module))
        tb = tb.tb_next
    for tb, path, module in reversed(frames):
        if _is_stdlib(path, module) or _builds_harness_record(tb.tb_frame, module):
            continue
        return RaiseSite(str(path), tb.tb_lineno, tb.tb_frame.f_code.co_name, _is_ours(path, module, folder))
    return None


def blame(exc: BaseException, folder: Path | None = None) -> Literal["agent", "benchmark"]:
    """``benchmark`` when the harness's or the benchmark's code raised ``exc`` (see the module docstring)."""
    if isinstance(exc, AgentFailure):
        return "agent"
    if isinstance(exc, HarnessError):  # e.g. a benchmark's SpecError: the run stops with its own message
        return "benchmark"
    site = raise_site(exc, folder)
    return "benchmark" if site is not None and site.ours else "agent"


def code_error(exc: BaseException, folder: Path | None, where: str, log: Path | None = None) -> HarnessError:
    """The error that stops the run: the exception and its raise site in one line (the traceback goes to ``log``)."""
    if isinstance(exc, HarnessError):
        return exc
    site = raise_site(exc, folder)
    if isinstance(exc, ValidationError):
        text = f"ValidationError: {exc.title}: {first_error(exc, show_input=True)}"[:200]
    else:
        text = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    at = ""
    if site is not None:
        shown = Path(site.file)
        base = folder.resolve().parent if folder is not None else Path.cwd()
        if shown.is_relative_to(base):
            shown = shown.relative_to(base)
        at = f" at {shown}:{site.line} in {site.function}"
    saved = ""
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
        saved = f"; traceback in {log}"
    return BenchmarkCodeError(
        f"benchmark code raised {text}{at} ({where}): a bug in the benchmark fails the run, it is not scored as the "
        f"agent's failure (raise harness.benchmark.AgentFailure for that){saved}"
    )
