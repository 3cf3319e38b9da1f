"""BFCL's checker protocol (``benchmarks/bfcl/protocol.py``): each line between the harness and the checker child
is a typed record of one protocol version."""

from __future__ import annotations

import json

from harness.benchmark import load_module
from support import REPO

FOLDER = REPO / "benchmarks" / "bfcl"
protocol = load_module(FOLDER / "protocol.py", "harness_benchmark_bfcl_protocol")


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
