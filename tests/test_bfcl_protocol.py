"""BFCL's checker protocol (``benchmarks/bfcl/protocol.py``): each line between the harness and the checker child
is a typed record of one protocol version, and a line that is not is refused in one line naming what is wrong.

The child's side runs the real child in BFCL's environment (``.venvs/bfcl``); the harness's side runs the real
:class:`Checker` against small child scripts that write what a broken child might.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.benchmark import load_module
from harness.paths import env_python
from support import REPO

FOLDER = REPO / "benchmarks" / "bfcl"
BFCL_PYTHON = env_python("bfcl")
protocol = load_module(FOLDER / "protocol.py", "harness_benchmark_bfcl_protocol")
checker = load_module(FOLDER / "checker.py", "harness_benchmark_bfcl_checker")


def test_every_record_reads_back_from_its_line() -> None:
    """A record survives its line: a model's text with a lone surrogate too (pydantic's JSON cannot carry one),
    and what BFCL leaves in a verdict's error that JSON cannot hold is written as its repr."""
    requests = [
        protocol.Prepare(entry={"id": "simple_python_0"}, mode="fc"),
        protocol.Check(entry={"id": "x"}, answer=None, mode="prompt", output="[f(a='\ud800')]"),
        protocol.Check(entry={"id": "x"}, answer=[{"f": {"a": [1]}}], mode="fc", output=[{"f": '{"a": 1}'}]),
        protocol.Step(entry={"id": "multi_turn_base_0"}, output="[add(a=1, b=2)]"),
        protocol.CheckMultiTurn(entry={"id": "multi_turn_base_0"}, answer=[["add(a=1, b=2)"]], output=[["Done."]]),
        protocol.Probe(),
        protocol.AskMaxSteps(),
    ]
    assert {r.op for r in requests} == {"prepare", "check", "step", "check_multi_turn", "probe", "max_steps"}
    for request in requests:
        assert protocol.read_request(protocol.line(request)) == request
    replies = [
        protocol.Ready(confinement="not confined: no mount namespace of its own"),
        protocol.Prepared(entry={"id": "x"}, messages=[{"role": "user", "content": "hi"}]),
        protocol.Verdict(valid=True),
        protocol.Stepped(decoded=None),
        protocol.Stepped(decoded=["add(a=1, b=2)"], results=['{"result": 3}'], message={"role": "user"}),
        protocol.Refused(refused="an argument is not a literal"),
        protocol.ProbeResult(ok=True),
        protocol.MaxSteps(max_steps=20),
        protocol.Failure(failure="KeyError: 'id'", trace="Traceback ..."),
    ]
    for reply in replies:
        assert protocol.read_reply(protocol.line(reply)) == reply
    odd = protocol.read_reply(protocol.line(protocol.Verdict(valid=False, error={"at": object()})))
    assert odd.error["at"].startswith("<object object at ")
    assert json.loads(protocol.line(protocol.Probe())) == {"schema_version": 1, "op": "probe"}


# -- the child: a request that is not a record of this version gets a one-line failure, and the child goes on ------


@pytest.mark.skipif(not BFCL_PYTHON.exists(), reason="the BFCL environment is missing (run `make env`)")
def test_the_child_refuses_a_request_of_another_version_in_one_line_and_keeps_serving(tmp_path: Path) -> None:
    bad = {
        "another version": ({"schema_version": 2, "op": "probe"}, "request: schema_version 2, not this protocol's"),
        "no version": ({"op": "probe"}, "request: schema_version: missing required key"),
        "not JSON": ("probe please", "request is not JSON: 'probe please'"),
        "unknown op": ({"schema_version": 1, "op": "eval"}, "request: op: unknown 'eval'"),
        "a field missing": ({"schema_version": 1, "op": "step", "entry": {}}, "request: step.output: missing"),
        "a field of another type": (
            {"schema_version": 1, "op": "check", "entry": {}, "answer": None, "mode": "python", "output": ""},
            "request: check.mode: Input should be 'prompt' or 'fc'",
        ),
        "an unknown field": ({"schema_version": 1, "op": "max_steps", "n": 1}, "request: max_steps.n: unknown key"),
    }
    lines = [raw if isinstance(raw, str) else json.dumps(raw) for raw, _ in bad.values()]
    lines += [protocol.line(protocol.AskMaxSteps()), protocol.line(protocol.Probe())]
    proc = subprocess.run(
        [str(BFCL_PYTHON), "-I", str(FOLDER / "child.py")],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "OPENAI_API_KEY": "unused", "BFCL_PROJECT_ROOT": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    hello, *replies = [protocol.read_reply(line) for line in proc.stdout.splitlines()]
    assert isinstance(hello, protocol.Ready)
    assert len(replies) == len(lines)
    for (name, (_raw, said)), reply in zip(bad.items(), replies[: len(bad)], strict=True):
        assert isinstance(reply, protocol.Failure), (name, reply)
        assert reply.failure.startswith(said) and "\n" not in reply.failure and not reply.trace, (name, reply)
    assert replies[-2:] == [protocol.MaxSteps(max_steps=20), protocol.ProbeResult(ok=True)]


# -- the harness: a reply that is not a record of this version is a CheckerError that names it --------------------


def fake_child(folder: Path, hello: dict[str, Any], reply: dict[str, Any]) -> Any:
    """A checker whose child writes ``hello``, then ``reply`` to every request."""
    python = folder / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(
        f"#!{sys.executable}\nimport sys\nprint({json.dumps(hello)!r}, flush=True)\n"
        f"for line in sys.stdin:\n    print({json.dumps(reply)!r}, flush=True)\n"
    )
    python.chmod(0o755)
    return checker.Checker(python=python)


READY = {"schema_version": 1, "reply": "ready", "confinement": "not confined: a test's child"}


@pytest.mark.parametrize(
    ("hello", "reply", "ask", "said"),
    [
        (
            {"ready": True, "confinement": "confined"},
            None,
            "max_steps",
            "BFCL checker: reply: schema_version: missing required key",
        ),
        ({**READY, "schema_version": 2}, None, "max_steps", "BFCL checker: reply: schema_version 2, not this"),
        (
            {"schema_version": 1, "reply": "failure", "failure": "ImportError: no BFCL here"},
            None,
            "max_steps",
            "BFCL checker did not start: it wrote a 'failure' reply",
        ),
        (
            READY,
            {"schema_version": 1, "reply": "max_steps", "max_steps": "twenty"},
            "max_steps",
            "BFCL checker: reply: max_steps.max_steps: Input should be a valid integer",
        ),
        (
            READY,
            {"schema_version": 1, "reply": "verdict", "valid": True},
            "max_steps",
            "BFCL checker: a 'verdict' reply to a 'max_steps' request",
        ),
        (
            READY,
            {"schema_version": 2, "reply": "verdict", "valid": True},
            "check",
            "BFCL checker: reply: schema_version 2, not this protocol's version 1; and it fails known-good input too",
        ),
        (
            READY,
            {"schema_version": 1, "reply": "verdict", "valid": "yes", "error_type": ""},
            "check",
            "BFCL checker: reply: verdict.valid: Input should be a valid boolean; and it fails known-good input too",
        ),
    ],
    ids=["unversioned hello", "hello of another version", "no hello", "a field", "another kind", "judged", "check"],
)
def test_the_checker_refuses_a_reply_that_is_not_a_record_of_this_version(
    tmp_path: Path, hello: dict[str, Any], reply: dict[str, Any] | None, ask: str, said: str
) -> None:
    live = fake_child(tmp_path, hello, reply or READY)
    try:
        with pytest.raises(checker.CheckerError) as caught:
            if ask == "check":
                live.check({"id": "simple_python_0"}, None, "prompt", "[f(x=1)]")
            else:
                live.max_steps()
        assert live._proc is None  # the child that wrote it is gone (the next request starts another)
    finally:
        live.close()
    message = str(caught.value)
    assert message.startswith(said) and "\n" not in message, message
