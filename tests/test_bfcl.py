"""BFCL: the harness's verdicts are BFCL's own, and model text that BFCL's decoder would evaluate never reaches it.

Everything here runs the real bfcl-eval package in its environment (``.venvs/bfcl``): the checker child the
benchmark uses, and, for the agreement test, BFCL's own file runners (``ast_file_runner``,
``relevance_file_runner``) over BFCL's own loaders, as its eval runner calls them.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.assets.data import load_split
from harness.benchmark import Episode, MessageRecord, RolloutContext, Task
from harness.paths import env_python
from harness.rollout.loading import open_benchmark

REPO = Path(__file__).resolve().parents[1]
BFCL_PYTHON = env_python("bfcl")

pytestmark = pytest.mark.skipif(not BFCL_PYTHON.exists(), reason="the BFCL environment is missing (run `make env`)")

# What BFCL's decoder would evaluate (argument values that are arithmetic or lambdas), with what they would do.
HOSTILE = {
    "shell": "calculate_triangle_area(base=__import__('os').system('touch {marker}') + 10, height=5)",
    "file write": "calculate_triangle_area(base=len(open('{marker}', 'w').write('x') * 'ab') + 1, height=5)",
    "attribute walk": "calculate_triangle_area(base=[c for c in ().__class__.__base__.__subclasses__()] + [], h=5)",
    "infinite loop": "calculate_triangle_area(base=[x for x in iter(int, 1)] + [], height=5)",
    "huge allocation": "calculate_triangle_area(base=' ' * 10 ** 12 + '', height=5)",
    "lambda": "calculate_triangle_area(base=lambda: __import__('os').system('touch {marker}'), height=5)",
    "behind a call": "[calculate_triangle_area(base=10, height=5), f(x=__import__('os').system('touch {marker}') + 1)]",
}


@pytest.fixture(scope="module")
def bench() -> Any:
    _spec, benchmark, _path = open_benchmark("bfcl")
    return benchmark


def tasks_of(bench: Any, split: str, n: int | None = None) -> list[Task]:
    rows, _ = load_split(bench.spec.dataset, split)
    return bench.tasks(rows[:n] if n else rows)


def call_text(calls: list[dict[str, dict[str, Any]]]) -> str:
    parts = []
    for call in calls:
        ((name, args),) = call.items()
        parts.append(f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})")
    return "[" + ", ".join(parts) + "]"


def right_calls(truth: list[dict[str, dict[str, list[Any]]]]) -> list[dict[str, dict[str, Any]]]:
    """One right answer from BFCL's possible answers: the first allowed value of each parameter (``""`` = omit)."""
    out = []
    for call in truth:
        ((name, params),) = call.items()
        out.append({name: {k: v[0] for k, v in params.items() if v and v[0] != ""}})
    return out


def wrong_calls(calls: list[dict[str, dict[str, Any]]], kind: int) -> str:
    """A wrong answer of one of five kinds (all plain calls with literal arguments, or prose)."""
    calls = json.loads(json.dumps(calls))
    ((name, args),) = calls[0].items()
    if kind == 0 and args:  # a wrong value
        key = next(iter(args))
        value = args[key]
        args[key] = value + 1000 if isinstance(value, int | float) and not isinstance(value, bool) else "zz-wrong"
    elif kind == 1 and args:  # a parameter missing
        args.pop(next(iter(args)))
    elif kind == 2:  # a function that is not offered
        calls[0] = {name + "_other": args}
    elif kind == 3:
        return "I am sorry, I cannot call any function for this."
    else:  # one call too many
        calls.append(calls[0])
    return call_text(calls)


def reference_verdicts(
    rounds: list[dict[str, list[dict[str, Any]]]], mode: str, score_dir: Path
) -> list[dict[str, bool]]:
    """BFCL's own verdicts, one dict per round of outputs (one output per task and round): its loaders, its handler
    for the mode, its file runners, its score files. One process for all rounds (BFCL's imports take seconds)."""
    script = r"""
import json, os, sys
from pathlib import Path
os.environ.setdefault("OPENAI_API_KEY", "unused")
from bfcl_eval.eval_checker import eval_runner
from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry, load_file
rounds, mode, score_dir = json.load(open(sys.argv[1])), sys.argv[2], Path(sys.argv[3])
registry = {"prompt": "gpt-4o-2024-11-20", "fc": "gpt-4o-2024-11-20-FC"}[mode]
handler = eval_runner.get_handler(registry)
all_verdicts = []
for outputs in rounds:
  verdicts = {}
  all_verdicts.append(verdicts)
  for category, results in outputs.items():
      ids = [r["id"] for r in results]
      prompts = {e["id"]: e for e in load_dataset_entry(category)}
      prompt = [prompts[i] for i in ids]
      if "irrelevance" in category:
          eval_runner.relevance_file_runner(handler, results, prompt, registry, category, score_dir)
      elif "multi_turn" in category:
          truths = {e["id"]: e for e in load_ground_truth_entry(category)}
          answers = [truths[i] for i in ids]
          eval_runner.multi_turn_runner(handler, results, prompt, answers, registry, category, score_dir)
      else:
          truths = {e["id"]: e for e in load_ground_truth_entry(category)}
          answers = [truths[i] for i in ids]
          eval_runner.ast_file_runner(handler, results, prompt, answers, category, registry, score_dir)
      (score,) = list(score_dir.rglob(f"*_{category}_score.json"))
      failed = {e["id"] for e in load_file(score)[1:]}
      score.unlink()
      verdicts.update({i: i not in failed for i in ids})
print(json.dumps(all_verdicts))
"""
    score_dir.mkdir(parents=True, exist_ok=True)
    (score_dir / "outputs.json").write_text(json.dumps(rounds))
    proc = subprocess.run(
        [str(BFCL_PYTHON), "-c", script, str(score_dir / "outputs.json"), mode, str(score_dir)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=score_dir,
        env={**os.environ, "OPENAI_API_KEY": "unused"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_hostile_replies_are_refused_and_never_run(bench: Any, tmp_path: Path) -> None:
    """Each hostile reply is refused (a failed sample, with the reason) and nothing of it runs; BFCL's own decoder,
    given the first one directly, does run it, so the refusal is what keeps it out."""
    (task,) = tasks_of(bench, "simple_python", 1)
    for name, template in HOSTILE.items():
        marker = tmp_path / f"ran-{name.replace(' ', '-')}"
        verdict = bench.verdict(template.format(marker=marker), task)
        assert verdict.valid is False and verdict.refused, (name, verdict)
        assert not marker.exists(), name
    marker = tmp_path / "bfcl-decoder-ran-it"
    probe = "from bfcl_eval.model_handler.utils import default_decode_ast_prompting as d; import sys; d(sys.argv[1])"
    subprocess.run(
        [str(BFCL_PYTHON), "-c", probe, HOSTILE["shell"].format(marker=marker)], capture_output=True, timeout=120
    )
    assert marker.exists(), "BFCL's decoder evaluates arithmetic arguments: the hostile reply is a real danger"


def test_right_and_wrong_replies_get_bfcls_verdicts(bench: Any) -> None:
    (task,) = tasks_of(bench, "simple_python", 1)  # calculate_triangle_area(base=10, height=5)
    assert bench.score("[calculate_triangle_area(base=10, height=5)]", task) == 1.0
    assert bench.score("calculate_triangle_area(base=10, height=5, unit='units')", task) == 1.0
    assert bench.score("[calculate_triangle_area(base=11, height=5)]", task) == 0.0
    wrong = bench.verdict("The area is 25.", task)
    assert wrong.valid is False and wrong.error_type == "ast_decoder:decoder_failed"

    def episode(text: str) -> Episode:
        return Episode(task_id=task.id, reward=0.0, passed=False, messages=[MessageRecord(role="assistant", text=text)])

    shaped = {
        text: bench.shaping(episode(text), task)
        for text in ("Use calculate_triangle_area with base 10.", "[calculate_triangle_area(base=1, height=1)]", "25")
    }
    assert [tuple(v.values()) for v in shaped.values()] == [(1.0, 0.0, 0.0), (1.0, 1.0, 1.0), (0.0, 0.0, 0.0)]
    (irrelevant,) = tasks_of(bench, "irrelevance", 1)
    assert bench.score("I cannot answer that with these functions.", irrelevant) == 1.0
    assert bench.score("[determine_body_mass_index(weight=10.0, height=5.0)]", irrelevant) == 0.0


def test_fc_mode_sends_bfcls_tools_and_checks_tool_calls(bench: Any) -> None:
    task = tasks_of(bench, "simple_python", 2)[1]  # math.factorial(number=5)
    bench.options = bench.options.model_copy(update={"mode": "fc"})
    bench._prepared.clear()
    try:
        (tool,) = bench.prepared(task).tools
        assert tool["type"] == "function" and tool["function"]["name"] == "math_factorial"  # dots sent as "_"
        assert bench.verdict([{"math_factorial": '{"number": 5}'}], task).valid is True
        assert bench.verdict([{"math_factorial": '{"number": 6}'}], task).valid is False
        assert bench.verdict("The factorial is 120.", task).valid is False
    finally:
        bench.options = bench.options.model_copy(update={"mode": "prompt"})
        bench._prepared.clear()


def test_verdicts_agree_with_bfcls_own_runner(bench: Any, tmp_path: Path) -> None:
    """Over 400 outputs of five categories, right and wrong, the harness's verdict equals BFCL's file runner's for
    every output made of plain calls with literal arguments; only the planted non-literal ones are refused."""
    per_category = {"simple_python": 60, "multiple": 30, "parallel": 30, "parallel_multiple": 30, "irrelevance": 50}
    rounds: list[dict[str, list[dict[str, Any]]]] = [{}, {}]
    tasks: dict[str, Task] = {}
    for category, n in per_category.items():
        for i, task in enumerate(tasks_of(bench, category, n)):
            tasks[task.id] = task
            if category == "irrelevance":
                function = task.data["function"][0]
                args = {p: 1 for p in function["parameters"].get("required", [])}
                right, wrong = "No function here fits the question.", call_text([{function["name"]: args}])
            else:
                calls = right_calls(json.loads(task.answer))
                right, wrong = call_text(calls), wrong_calls(calls, i % 5)
                if i % 10 == 9:  # a non-literal argument: refused by the harness, excluded from the comparison
                    wrong = wrong.replace("(", "(zz=1 + 1, ", 1) if "(" in wrong else wrong
            rounds[0].setdefault(category, []).append({"id": task.id, "result": right})
            rounds[1].setdefault(category, []).append({"id": task.id, "result": wrong})
    compared = refused = 0
    disagreements = []
    passed = {True: 0, False: 0}
    for outputs, expected in zip(rounds, reference_verdicts(rounds, "prompt", tmp_path), strict=True):
        for results in outputs.values():
            for result in results:
                verdict = bench.verdict(result["result"], tasks[result["id"]])
                if verdict.refused:
                    refused += 1
                    continue
                compared += 1
                passed[verdict.valid] += 1
                if verdict.valid != expected[result["id"]]:
                    disagreements.append((result["id"], result["result"], verdict, expected[result["id"]]))
    assert not disagreements, disagreements[:5]
    assert compared >= 200 and passed[True] >= 100 and passed[False] >= 100, (compared, passed)
    assert refused == sum(n // 10 for c, n in per_category.items() if c != "irrelevance")


def test_fc_verdicts_agree_with_bfcls_own_runner(bench: Any, tmp_path: Path) -> None:
    tasks = tasks_of(bench, "simple_python", 40)
    outputs = []
    for i, task in enumerate(tasks):
        ((name, args),) = right_calls(json.loads(task.answer))[0].items()
        if i % 2:
            key = next(iter(args), None)
            if key is not None:
                args[key] = "zz-wrong"
        outputs.append({"id": task.id, "result": [{name.replace(".", "_"): json.dumps(args)}]})
    (expected,) = reference_verdicts([{"simple_python": outputs}], "fc", tmp_path)
    bench.options = bench.options.model_copy(update={"mode": "fc"})
    bench._prepared.clear()
    try:
        by_id = {t.id: t for t in tasks}
        got = {o["id"]: bench.verdict(o["result"], by_id[o["id"]]).valid for o in outputs}
    finally:
        bench.options = bench.options.model_copy(update={"mode": "prompt"})
        bench._prepared.clear()
    assert got == expected
    assert 10 <= sum(got.values()) <= 30


@pytest.mark.slow
def test_bfcl_run_end_to_end(smoke_model: Path, tmp_path: Path) -> None:
    """`harness run bfcl --profile simple-python` (no training, so it evaluates, as `make bench-bfcl` does with its
    default profile) with the served embedded model: a row, every episode scored by the checker."""
    env = {**os.environ, "HARNESS_RESULTS": str(tmp_path / "results"), "HARNESS_ARTIFACTS": str(tmp_path / "a")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "bfcl",
            "-p",
            "simple-python",
            "--limit",
            "4",
            "--backend",
            "local",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "bfcl/simple-python has no training: evaluating only (as --eval-only)" in proc.stdout
    (rollouts,) = list((tmp_path / "a").rglob("rollouts-after.jsonl"))
    episodes = [json.loads(line) for line in rollouts.read_text().splitlines()]
    assert len(episodes) == 4
    assert all(e["info"]["category"] == "simple_python" for e in episodes)
    assert all(e["passed"] or e["info"]["error_type"] for e in episodes)  # a failed sample says why
    assert (tmp_path / "results" / "bfcl" / "runs.csv").exists()


# -- multi-turn: calls run on BFCL's stateful backends, the verdict is its state check ---------------------------


class ScriptedPolicy:
    """An OpenAI-compatible client whose replies are given in advance (one list per user turn): the policy side of
    a multi-turn rollout, so the loop, the backends and the checker are exercised without a model's randomness."""

    def __init__(self, turns: list[list[str]]) -> None:
        self.turns = [list(t) for t in turns]
        self.seen: list[list[dict[str, Any]]] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    async def create(self, **kwargs: Any) -> Any:
        self.seen.append(kwargs["messages"])
        users = sum(1 for m in kwargs["messages"] if m["role"] == "user" and not m["content"].startswith("[{'role'"))
        turn = self.turns[users - 1]
        text = turn.pop(0) if turn else "Done."
        usage = SimpleNamespace(prompt_tokens=1, completion_tokens=1)
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=text))], usage=usage)


def context(client: Any) -> RolloutContext:
    return RolloutContext(
        base_url="scripted",
        model="scripted",
        temperature=0.0,
        max_tokens=64,
        max_turns=1,
        request_timeout_s=60,
        seed=0,
        client=client,
    )


def truth_replies(task: Task) -> list[list[str]]:
    """The ground truth's calls, one reply per turn, then a reply that is not a call (ending the turn)."""
    return [["[" + ", ".join(turn) + "]", "Done."] for turn in json.loads(task.answer)]


def test_multi_turn_runs_calls_on_fresh_backends_and_checks_their_state(bench: Any) -> None:
    task = tasks_of(bench, "multi_turn_base", 1)[0]  # cd, mkdir temp, mv ...: a second shared run would differ

    async def two_samples() -> list[Episode]:
        return list(
            await asyncio.gather(*(bench.rollout(task, context(ScriptedPolicy(truth_replies(task)))) for _ in range(2)))
        )

    first, second = asyncio.run(two_samples())
    for episode in (first, second):
        assert episode.info["category"] == "multi_turn_base" and episode.tool_calls >= 10
        tool_results = [m.tool_results for m in episode.messages if m.tool_results]
        assert "moved to 'temp/final_report.pdf'" in tool_results[0][2]
    # BFCL's own verdict for this ground truth (its decoder drops the positional argument of sort('...'))
    assert first.passed == second.passed and first.info["error_type"] == second.info["error_type"]
    wrong = truth_replies(task)
    wrong[0][0] = wrong[0][0].replace("dir_name='temp'", "dir_name='tmp'")
    episode = asyncio.run(bench.rollout(task, context(ScriptedPolicy(wrong))))
    assert not episode.passed and episode.info["error_type"].startswith("multi_turn:")


def test_dispatch_agrees_with_bfcls_executor_on_every_multi_turn_task(tmp_path: Path) -> None:
    """Multi-turn calls run by name on the task's backends (``dispatch.py``), never through BFCL's ``eval``: on every
    multi-turn task BFCL ships, turn by turn, the ground truth's calls give the same results and backend states as
    BFCL's executor gives them, both as its checker runs them and as a model replying with them would have them run
    (its decoder, then its executor). Hostile replies are in tests/reliability/test_bfcl_hostile.py."""
    proc = subprocess.run(
        [str(BFCL_PYTHON), str(REPO / "tests" / "bfcl_dispatch_agreement.py"), str(REPO / "benchmarks" / "bfcl")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "OPENAI_API_KEY": "unused", "BFCL_PROJECT_ROOT": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["mismatches"] == [], report["mismatches"]
    assert report["categories"] == 4 and report["tasks"] == 800 and report["calls"] > 4000, report


def test_multi_turn_verdicts_agree_with_bfcls_own_runner(bench: Any, tmp_path: Path) -> None:
    """30 tasks, each with a right and a wrong conversation: the harness's verdict (its multi-turn loop's replies,
    checked in a fresh child) equals BFCL's multi-turn runner's on the same replies."""
    tasks = tasks_of(bench, "multi_turn_base", 30)
    rounds: list[list[dict[str, Any]]] = [[], []]
    for i, task in enumerate(tasks):
        right = truth_replies(task)
        wrong = json.loads(json.dumps(right))
        if i % 2:
            wrong[-1] = ["Done."]  # the last turn's calls left out
        else:
            wrong[0][0] = re.sub(r"=('[^']*'|\d+)", "='zz'", wrong[0][0], count=1)  # a wrong first argument
        rounds[0].append({"id": task.id, "result": right})
        rounds[1].append({"id": task.id, "result": wrong})
    by_id = {t.id: t for t in tasks}
    verdicts: dict[bool, int] = {True: 0, False: 0}
    mt_rounds = [{"multi_turn_base": outputs} for outputs in rounds]
    for outputs, expected in zip(rounds, reference_verdicts(mt_rounds, "prompt", tmp_path), strict=True):
        for output in outputs:
            episode = asyncio.run(bench.rollout(by_id[output["id"]], context(ScriptedPolicy(output["result"]))))
            assert episode.passed == expected[output["id"]], (output["id"], episode.info)
            verdicts[episode.passed] += 1
    assert verdicts[True] >= 10 and verdicts[False] >= 30, verdicts
