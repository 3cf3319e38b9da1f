"""BFCL under a hostile model: model text never reaches ``eval``, the checker child cannot write outside its scratch
folder, and a reply can fail only its own sample.

A scripted OpenAI-compatible server (a real HTTP server) plays the model; each sample of a task gets its own reply
(the request's seed is the sample's index). The replies go through the evaluator's own path
(``harness.rollout.evaluate`` -> the bfcl benchmark -> its checker child in BFCL's environment). For every hostile
reply: no file appears outside the checker's scratch folder, the sample fails with a reason, the evaluation
completes, and the sample after it (the ground truth's replies) is scored as BFCL scores it. BFCL's own executor,
given the same replies, does run them: so the harness's path is what keeps them out.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.assets.data import load_split
from harness.benchmark.protocol import Episode, Task
from harness.paths import env_python
from harness.rollout.evaluate import EvalSettings, evaluate
from harness.rollout.loading import open_benchmark
from support import REPO
from support_reliability import FIGURES, ScriptedModel, chat_completion, read_body, send_json

BFCL_PYTHON = env_python("bfcl")
pytestmark = pytest.mark.skipif(not BFCL_PYTHON.exists(), reason="the BFCL environment is missing (run `make env`)")
FOLDER = REPO / "benchmarks" / "bfcl"
MULTI_TURN_TASK = "multi_turn_base_15"  # the file system and the math backend; its ground truth passes


def multi_turn_hostile(marker: Path) -> dict[str, tuple[str, str]]:
    """name -> (reply, what the harness does with it). ``marker`` is a file outside the scratch folder that any
    payload that ran would create."""
    touch = f"touch {marker}"
    return {
        # BFCL pastes dictionary keys into the string it evaluates, unescaped
        "dictionary key": (f"[add(a={{\"x': __import__('os').system('{touch}'), 'y\": 1}}, b=2)]", "error result"),
        # BFCL checks the last part of a dotted name only; inspect is a global of its executor's module
        "dotted name": (f"[inspect.os.system(command='{touch}')]", "error result"),
        # Python folds fullwidth letters to ASCII when it parses a name; a check of the raw text misses them
        "fullwidth name": (f"[ｉｎｓｐｅｃｔ.ｏｓ.ｓｙｓｔｅｍ(command='{touch}')]", "error result"),
        "fullwidth method": ("[ａｄｄ(a=1, b=2)]", "error result"),
        "builtin": (f"[open(file='{marker}', mode='w')]", "error result"),
        "denied name": ("[remove(path='DataSet1.csv')]", "error result"),
        "unpacked arguments": ("[add(**{'a': 1, 'b': 2})]", "error result"),
        "arithmetic argument": (f"[add(a=__import__('os').system('{touch}') + 1, b=2)]", "refused"),
        "huge integer": ("[add(a=0x" + "f" * 5000 + ", b=1)]", "refused"),
        "deep nesting": ("[mean(numbers=" + "[" * 40 + "1" + "]" * 40 + ")]", "refused"),
        "50 MB string": ("[echo(content='" + "x" * (50 << 20) + "', file_name='big.txt')]", "refused"),
        "endless evaluation": ("[square_root(number=2, precision=100000000)]", "checker"),
        "null byte": ("[add(a=1, b=2)]\x00", "no call"),
        # the reply runs (the file system takes any string); sending it back to the model cannot be encoded
        "lone surrogate": ("[echo(content='\ud800', file_name='s.txt')]", "agent error"),
    }


class PerSample(ScriptedModel):
    """Sample ``i`` of a multi-turn task: ``scripts[i]`` gives the replies of each user turn in order ("Done." once
    they run out), so a hostile reply opens the conversation and the last sample replays the ground truth."""

    def __init__(self, scripts: list[list[list[str]]]) -> None:
        super().__init__(lambda _messages: {})
        self.scripts = scripts

    def handle(self, request: Any) -> None:
        body = json.loads(read_body(request))
        messages = body["messages"]
        users = [i for i, m in enumerate(messages) if m["role"] == "user" and not m["content"].startswith("[{'role'")]
        steps = sum(1 for m in messages[users[-1] :] if m["role"] == "assistant")
        turns = self.scripts[body["seed"]]
        turn = turns[len(users) - 1] if len(users) - 1 < len(turns) else []
        send_json(request, 200, chat_completion("scripted", turn[steps] if steps < len(turn) else "Done."))


def settings(base_url: str, samples: int) -> EvalSettings:
    return EvalSettings(
        base_url=base_url,
        model="scripted",
        temperature=0.0,
        max_tokens=64,
        max_turns=1,
        concurrency=4,
        samples_per_task=samples,
        request_timeout_s=120,
        retries=0,
        seed=0,
    )


def task_of(bench: Any, split: str, task_id: str) -> Task:
    rows, _ = load_split(bench.spec.dataset, split)
    (task,) = bench.tasks([r for r in rows if r["id"] == task_id])
    return task


def files_outside_scratch(marker: Path) -> list[Path]:
    return sorted(marker.parent.glob(f"{marker.name}*"))


def test_multi_turn_hostile_replies_fail_their_sample_and_never_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _spec, bench, _ = open_benchmark("bfcl")
    checker = sys.modules[bench.__class__.__module__]._checker
    monkeypatch.setattr(checker, "REQUEST_TIMEOUT_S", 8.0)  # the endless evaluation is killed after 8 s
    task = task_of(bench, "multi_turn_base", MULTI_TURN_TASK)
    marker = tmp_path / "ran"
    hostile = multi_turn_hostile(marker)
    truth = [["[" + ", ".join(turn) + "]", "Done."] for turn in json.loads(task.answer)]
    scripts = [[[reply]] for reply, _ in hostile.values()] + [truth]
    with PerSample(scripts) as model:
        episodes = asyncio.run(evaluate(bench, [task], settings(model.base_url, len(scripts)), tmp_path / "r.jsonl"))
    assert files_outside_scratch(marker) == []
    *attacked, benign = episodes
    assert benign.passed and not benign.error_kind, benign.info  # the sample after them scores as BFCL's
    for (name, (_reply, outcome)), episode in zip(hostile.items(), attacked, strict=True):
        assert not episode.passed, (name, episode.info)
        if outcome == "agent error":  # the agent's request failed: a failed sample (0 in the pass rate), with why
            assert episode.error_kind == "agent" and "surrogates not allowed" in episode.error, (name, episode.error)
            continue
        assert not episode.error_kind, (name, episode.error, episode.info)
        results = [r for m in episode.messages for r in m.tool_results if isinstance(r, str)]
        if outcome == "refused":
            assert episode.info["failure"] == "refused" and episode.info["refused"], (name, episode.info)
        elif outcome == "checker":
            assert episode.info["failure"] == "checker", (name, episode.info)
            assert "no answer within 8 s" in episode.info["checker_failed"], episode.info
        elif outcome == "error result":
            assert results and all(r.startswith("Error during execution") for r in results[:1]), (name, results)
            assert episode.info["error_type"].startswith("multi_turn:"), (name, episode.info)
        else:
            assert not results and episode.tool_calls == 0, (name, episode.messages[-1])
    lines = (tmp_path / "r.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(scripts)  # every sample recorded, the lone surrogate's too (escaped)
    FIGURES.add("hostile multi-turn BFCL replies, each failing only its own sample", len(attacked))


def bfcl_executor_runs(call: str) -> None:
    """BFCL's own multi-turn executor on one call string, as its inference loop gives it decoded calls."""
    probe = (
        "import sys; from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call"
        " as x; x([sys.argv[1]], {}, ['MathAPI'], 'm', 't1')"
    )
    env = {**os.environ, "OPENAI_API_KEY": "unused", "BFCL_PROJECT_ROOT": str(Path(call).parent)}
    subprocess.run([str(BFCL_PYTHON), "-c", probe, call], capture_output=True, timeout=120, env=env, cwd="/")


def test_bfcls_own_executor_runs_what_the_harness_keeps_out(tmp_path: Path) -> None:
    """The danger is real: BFCL's executor, given the decoded calls of the first three hostile replies, runs them."""
    for i, call in enumerate(
        [
            "add(a={'x': __import__('os').system('touch {m}'), 'y': 1}, b=2)",  # the key pasted back unescaped
            "inspect.os.system(command='touch {m}')",
            "ｉｎｓｐｅｃｔ.ｏｓ.ｓｙｓｔｅｍ(command='touch {m}')",
        ]
    ):
        marker = tmp_path / f"bfcl-ran-{i}"
        bfcl_executor_runs(call.replace("{m}", str(marker)))
        assert marker.exists(), call


def test_single_turn_hostile_replies_fail_their_sample(tmp_path: Path) -> None:
    _spec, bench, _ = open_benchmark("bfcl")
    task = task_of(bench, "simple_python", "simple_python_0")  # calculate_triangle_area(base=10, height=5)
    marker = tmp_path / "ran"
    replies = {
        "arithmetic argument": f"[calculate_triangle_area(base=__import__('os').system('touch {marker}') + 1)]",
        "lambda": f"[calculate_triangle_area(base=lambda: open('{marker}', 'w'), height=5)]",
        "huge integer": "[calculate_triangle_area(base=0x" + "f" * 5000 + ", height=5)]",
        "deep nesting": "[calculate_triangle_area(base=" + "[" * 40 + "1" + "]" * 40 + ", height=5)]",
        "50 MB string": "[calculate_triangle_area(base='" + "x" * (50 << 20) + "', height=5)]",
        "dictionary key": f"[calculate_triangle_area(base={{\"x': open('{marker}', 'w'), 'y\": 1}}, height=5)]",
        "lone surrogate": "[calculate_triangle_area(base='\ud800', height=5)]",
    }
    scripts = [[[reply]] for reply in replies.values()] + [[["[calculate_triangle_area(base=10, height=5)]"]]]
    with PerSample(scripts) as model:
        episodes = asyncio.run(evaluate(bench, [task], settings(model.base_url, len(scripts)), tmp_path / "r.jsonl"))
    assert files_outside_scratch(marker) == []
    *attacked, right = episodes
    assert right.passed, right.info
    for name, episode in zip(replies, attacked, strict=True):
        assert not episode.passed and not episode.error_kind and episode.info["error_type"], (name, episode.info)
    refused = [name for name, e in zip(replies, attacked, strict=True) if e.info.get("failure") == "refused"]
    assert refused == ["arithmetic argument", "lambda", "huge integer", "deep nesting", "50 MB string"]
    # a trainer's reward goes through the same verdict: 0 for each, and no exception
    assert [bench.score(reply, task) for reply in replies.values()] == [0.0] * len(replies)
    FIGURES.add("hostile single-turn BFCL replies, each failing only its own sample", len(attacked))


def test_a_reply_that_breaks_the_checker_fails_its_sample_and_a_broken_checker_fails_the_run(tmp_path: Path) -> None:
    """The rule behind "a reply fails only its sample": after the child fails on a request, a probe of known-good
    input decides. It passes: the failure was the reply's (``ReplyFault``). It fails too: the checker is broken
    (``CheckerError``, which stops the run)."""
    _spec, bench, _ = open_benchmark("bfcl")
    checker = sys.modules[bench.__class__.__module__]._checker
    live = checker.Checker()
    try:
        with pytest.raises(checker.ReplyFault, match="KeyError"):
            live.check({}, None, "prompt", "[f(x=1)]")
        live.probe()  # the same child scores known-good input afterwards
    finally:
        live.close()
    broken_env = tmp_path / "env"
    (broken_env / "bin").mkdir(parents=True)
    fake = broken_env / "bin" / "python"
    ready = json.dumps({"schema_version": 1, "reply": "ready", "confinement": "not confined: a test's child"})
    failure = json.dumps({"schema_version": 1, "reply": "failure", "failure": "ImportError: no BFCL here"})
    fake.write_text(
        f"#!{sys.executable}\nimport sys\nprint({ready!r}, flush=True)\n"
        f"for line in sys.stdin:\n    print({failure!r}, flush=True)\n"
    )
    fake.chmod(0o755)
    broken = checker.Checker(python=fake)
    try:
        with pytest.raises(checker.CheckerError, match="fails known-good input too"):
            broken.check({}, None, "prompt", "[f(x=1)]")
    finally:
        broken.close()


def test_the_checker_child_cannot_write_outside_its_scratch_folder(tmp_path: Path) -> None:
    """Defence in depth, whatever runs in the child: where the machine gives it a mount namespace, every mount but
    its scratch folder is read-only there (and nothing changes for the rest of the machine); where it does not, the
    child says it is not confined."""
    _spec, bench, _ = open_benchmark("bfcl")
    checker = sys.modules[bench.__class__.__module__]._checker
    prefix = checker.sandbox_prefix()
    live = checker.Checker()
    try:
        live.probe()
        line = live.confinement
    finally:
        live.close()
    if "--mount" not in prefix:
        assert line.startswith("not confined"), line
        return
    assert line == "confined: the file system is read-only but the scratch folder", line
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    outside = tmp_path / "outside"
    script = (
        "import importlib.util, os, sys\n"
        f"spec = importlib.util.spec_from_file_location('c', {str(FOLDER / 'confine.py')!r})\n"
        "c = importlib.util.module_from_spec(spec); spec.loader.exec_module(c)\n"
        f"print(c.confine(__import__('pathlib').Path({str(scratch)!r}), os.environ['NS']))\n"
        f"open({str(scratch / 'inside')!r}, 'w').write('x')\n"
        "for target in sys.argv[1:]:\n"
        "    try:\n        open(target, 'w').write('x'); print('wrote', target)\n"
        "    except OSError as exc:\n        print('refused', target, exc.strerror)\n"
    )
    targets = [str(outside), "/tmp/harness-confine-probe", str(Path.home() / "harness-confine-probe")]
    proc = subprocess.run(
        [*prefix, str(BFCL_PYTHON), "-I", "-c", script, *targets],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NS": os.readlink("/proc/self/ns/mnt")},
        cwd=scratch,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout.splitlines()
    assert out[0] == "confined: the file system is read-only but the scratch folder", out
    assert [o.split()[0] for o in out[1:]] == ["refused"] * len(targets), out
    assert (scratch / "inside").read_text() == "x"
    assert not any(Path(t).exists() for t in targets)
    (tmp_path / "after").write_text("x")  # this process's own file system is untouched


def test_the_manifest_counts_the_samples_the_benchmark_failed_itself() -> None:
    from harness.run.state import summarize

    def episode(sample: int, **info: Any) -> Episode:
        return Episode(task_id="t", sample=sample, reward=0.0, passed=False, info=info)

    summary = summarize([episode(0, failure="refused"), episode(1, failure="checker"), episode(2), episode(3)])
    assert summary.failures == {"checker": 1, "refused": 1} and summary.n_scored == 4
