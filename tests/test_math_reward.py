"""Tests of ``benchmarks/math/reward.py``: agreement with the reference checker, and safety on hostile answers.

The reference (the original sample's checker) evaluates answers with ``sympy.parse_expr``, which runs Python ``eval``
on its input. It is reimplemented here as an *oracle* and only ever called on trusted strings: the dataset's ground
truths, the fixed prediction table below, and arithmetic generated from digits and operators.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import re
import string
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
REWARD_FILE = REPO / "benchmarks" / "math" / "reward.py"
TIME_BOUND_S = 2.0  # a safety bound per call, not a speed test


def _load_reward() -> ModuleType:
    """Load the module by file path, the way the harness loads benchmarks (there are no ``__init__`` files)."""
    spec = importlib.util.spec_from_file_location("benchmarks_math_reward", REWARD_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RW = _load_reward()


@pytest.fixture(scope="module")
def rw() -> ModuleType:
    return RW


# --------------------------------------------------------------------------------------------------------------------
# Dataset
# --------------------------------------------------------------------------------------------------------------------


def _ground_truths() -> list[tuple[str, str]]:
    """The 84 recorded results of the math dataset, as shipped in benchmarks/math/data/."""
    folder = Path(__file__).resolve().parents[1] / "benchmarks" / "math" / "data"
    rows = []
    for split in ("train", "test"):
        for line in (folder / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                rows.append((f"{split}:{record['id']}", str(record["result"])))
    return rows


GROUND_TRUTHS = _ground_truths()

# Trusted truths that the dataset lacks but model answers meet: pi-ish and e-ish values, zero, negatives,
# the calculator's "= around" form, option letters with parentheses or spaces.
EXTRA_TRUTHS = ["3.14", "2.72", "0", "-7", "0.001", "1e3", "10**6", "2/3 = around 0.666667", "(B)", " c ", "1.5"]


def _truth_params() -> list[Any]:
    return [pytest.param(truth, id=f"{key}={truth}") for key, truth in GROUND_TRUTHS] + [
        pytest.param(truth, id=f"extra={truth}") for truth in EXTRA_TRUTHS
    ]


def test_dataset_has_all_84_results() -> None:
    assert len(GROUND_TRUTHS) == 84
    # Every result is an option letter, an integer (maybe with ``_`` separators), a decimal or a fraction.
    shapes = re.compile(r"[A-E]|\d+(_\d{3})*|\d+\.\d+|\d+/\d+")
    assert all(shapes.fullmatch(truth) for _, truth in GROUND_TRUTHS)


# --------------------------------------------------------------------------------------------------------------------
# The oracle: the reference semantics with sympy (trusted inputs only)
# --------------------------------------------------------------------------------------------------------------------

ORACLE_PATTERN = re.compile(r"###\s*(.+?)(\s*###|$)")


def _oracle_float(text: str) -> float:
    from sympy.parsing.sympy_parser import parse_expr  # type: ignore[import-untyped]

    if " = around " in text:
        text = text.split(" = around ")[0]
    return float(parse_expr(text, evaluate=True).evalf())


@functools.cache
def _oracle_float_or_none(text: str) -> float | None:
    """``_oracle_float``, with ``None`` for "raised" (cached: the table asks for the same strings many times)."""
    try:
        return _oracle_float(text)
    except Exception:
        return None


def _oracle_normalize(option: str) -> str:
    return re.sub(r"(\s+|\(|\))", "", option)


def oracle_same(pred: str | None, true: str | None, rel_tol: float = 1e-2) -> bool:
    pred = str(pred) if pred is not None else ""
    true = str(true) if true is not None else ""
    if pred.strip() == true.strip():
        return True
    if _oracle_normalize(true) in list(string.ascii_letters):
        return _oracle_normalize(pred) == _oracle_normalize(true)
    pred_value = _oracle_float_or_none(pred)
    true_value = _oracle_float_or_none(true)
    if pred_value is None or true_value is None:
        return False  # the reference's ``except Exception: pass``
    try:
        return math.isclose(pred_value, true_value, rel_tol=rel_tol)
    except ValueError:
        return False


def oracle_extract(text: str) -> str | None:
    match = ORACLE_PATTERN.search(text)
    return match.group(1) if match else None


def oracle_reward(text: str, truth: str) -> float:
    answer = oracle_extract(text)
    return float(oracle_same(answer, truth)) if answer is not None else 0.0


def _oracle_value(truth: str) -> float | None:
    value = _oracle_float_or_none(truth)
    return value if value is not None and math.isfinite(value) else None


@pytest.fixture(scope="module")
def oracle() -> None:
    pytest.importorskip("sympy", reason="the reference oracle needs sympy (a dev dependency)")


# --------------------------------------------------------------------------------------------------------------------
# Agreement with the oracle: every truth x a table of tricky predictions
# --------------------------------------------------------------------------------------------------------------------

GENERIC_PREDICTIONS = [
    "",
    " ",
    "0",
    "-0",
    "1",
    "-1",
    "42",
    "-42",
    "+5",
    "- 5",
    "(5)",
    "5.0",
    "A",
    "(A)",
    "a",
    " B ",
    "(c)",
    "C.",
    "D)",
    "E",  # sympy's Euler number when the truth is numeric, a letter when the truth is an option
    "e",  # a plain symbol for sympy: never a number
    "pi",
    "x",
    "None",
    "True",
    "2/3",
    "0.6667",
    "0.67",
    "0.66",  # exactly 1 % below 2/3: decided by float rounding, identically on both sides
    "0.65",
    "2/3 = around 0.666667",
    "0.09",  # exactly 1 % below 1/11
    "12%",  # a syntax error for sympy ("%" is modulo): percentages never count
    "50 %",
    "7 % 3",  # modulo: 1
    "15 degrees",
    "$12",
    "12 dollars",
    "1,000",  # a tuple for sympy: not a number
    "1_000",
    "1 000",
    "1000",
    "1e3",
    "10**6",
    "2**-1",
    "05",  # leading zeros are a syntax error
    "0x10",
    "1/0",
    "0/0",
    "3.65",
    "5.14",
    "24/49",
    "0.4898",
    "36/7",
    "sqrt(2)",
    "sqrt(16)",
    "2**0.5",
    "(-8)**(1/3)",
    "2^3",  # XOR for sympy; see KNOWN_DIVERGENCES
    "3!",  # factorial for sympy; see KNOWN_DIVERGENCES
    "[5]",
    "5,",
    "x = 5",
    "\t5\n",
    "−5",  # U+2212 MINUS SIGN
    "1/3*3",
    "999999999999",
    "1e-9",
]


def _numeric_variants(truth: str, value: float) -> list[str]:
    variants = [
        repr(value),
        f"{value:.4g}",
        f"{value:.2f}",
        f"{value:.0f}",
        f"{value:e}",
        f"{value:,.0f}",
        f"{value * 1.009:.10g}",
        f"{value * 0.991:.10g}",
        f"{value * 1.011:.10g}",
        f"{value * 0.989:.10g}",
        f"{value + 1:g}",
        f"{-value:g}",
        f"{value * 100:g}",
        f"{value * 1000:g}",
        f"{truth} = around {value:.6f}",
        f"{value:.6g} = around {value + 5:g}",
        f"({truth})/1",
        f"2*{truth}/2",
        f"{truth}**1",
        f"sqrt(({truth})**2)",
        f"{truth}/100",
        f"{truth} + 0.001",
    ]
    if value >= 0:
        variants.append(f"sqrt({truth})**2")
    return variants


def _predictions(truth: str) -> list[str]:
    core = truth.strip()
    derived = [
        truth,
        core,
        f" {core} ",
        f"\n{core}\n",
        f"({core})",
        f"{core}.",
        f"{core})",
        core.lower(),
        core.upper(),
        f"({core.lower()})",
        f"Option {core}",
        f"-{core}",
        f"+{core}",
        f"{core}%",
        f"{core} %",
        f"{core} degrees",
        f"${core}",
        f"{core}0",
        f"1{core}",
        core.replace("_", ""),
        core.replace("_", ","),
        core.replace("_", " "),
    ]
    if "/" in core and " = " not in core:
        numerator, denominator = core.split("/", 1)
        derived += [f"{numerator} / {denominator}", f"({numerator})/({denominator})", f"{denominator}/{numerator}"]
        derived.append(f"{numerator}:{denominator}")
    value = _oracle_value(truth)
    if value is not None:
        derived += _numeric_variants(core, value)
    return list(dict.fromkeys(GENERIC_PREDICTIONS + derived))


# Where the reference's answer comes from a sympy notation that this implementation deliberately does not accept:
# ``^`` is Python's XOR for sympy (so "2^3" scores as 1: a quirk, not a feature worth copying) and ``n!`` is
# sympy's factorial notation (needs a parser beyond Python's grammar). Both are rejected, i.e. "not a number".
KNOWN_DIVERGENCES = {("2^3", "1"), ("3!", "6")}


@pytest.mark.parametrize("truth", _truth_params())
def test_agrees_with_reference(rw: ModuleType, oracle: None, truth: str) -> None:
    disagreements = set()
    for prediction in _predictions(truth):
        expected = oracle_same(prediction, truth)
        got = rw.is_correct(prediction, truth)
        assert isinstance(got, bool)
        if got != expected:
            disagreements.add((prediction, truth, expected))
            continue
        text = f"Let me compute.\n<result>{prediction}</result>\n### {prediction}"
        assert rw.reward(text, truth) == oracle_reward(text, truth), (prediction, truth)
    expected_divergences = {(p, t, True) for p, t in KNOWN_DIVERGENCES if t == truth}
    assert disagreements == expected_divergences


def test_table_covers_both_outcomes(oracle: None) -> None:
    """Guard against a vacuous table: it must hold plenty of correct and incorrect predictions for numeric truths."""
    outcomes = [oracle_same(p, t) for _, t in GROUND_TRUTHS for p in _predictions(t)]
    assert len(outcomes) > 84 * 20
    assert sum(outcomes) > 84 * 5
    assert len(outcomes) - sum(outcomes) > 84 * 20


def test_reward_examples(rw: ModuleType) -> None:
    assert rw.reward("The answer is ### 2/3", "2/3") == 1.0
    assert rw.reward("### 0.667", "2/3") == 1.0
    assert rw.reward("### 0.7", "2/3") == 0.0
    assert rw.reward("### 1540", "1_540") == 1.0
    assert rw.reward("### (C)", "C") == 1.0
    assert rw.reward("### c", "C") == 0.0
    assert rw.reward("### 12%", "12") == 0.0
    assert rw.reward("### 3.1416", "pi") == 1.0
    assert rw.reward("no marker, 42", "42") == 0.0
    assert rw.reward(None, "42") == 0.0
    assert rw.is_correct(None, None) is True  # both empty, as in the reference
    assert rw.is_correct("1.05", "1", rel_tol=0.1) is True
    assert rw.is_correct("1.05", "1", rel_tol=-1.0) is False  # math.isclose refuses a negative tolerance


def test_known_divergences_are_rejections(rw: ModuleType, oracle: None) -> None:
    for prediction, truth in KNOWN_DIVERGENCES:
        assert oracle_same(prediction, truth) is True
        assert rw.is_correct(prediction, truth) is False
        assert rw.safe_eval_number(prediction) is None


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("2/3", 2 / 3),
        (" 1_540 ", 1540.0),
        ("-5", -5.0),
        ("+5", 5.0),
        ("--5", 5.0),
        ("(5)", 5.0),
        (".5", 0.5),
        ("5.", 5.0),
        ("1e3", 1000.0),
        ("0x10", 16.0),
        ("7 % 3", 1.0),
        ("-7 % 3", 2.0),
        ("2**-2", 0.25),
        ("-2**2", -4.0),
        ("0**0", 1.0),
        ("(-3)**2.0", 9.0),
        ("sqrt(16)", 4.0),
        ("2*pi", 2 * math.pi),
        ("E", math.e),
        ("2/3 = around 0.666667", 2 / 3),
        ("5 # comment", 5.0),
        ("(" * 90 + "1" + ")" * 90, 1.0),
        ("10**300 / 10**299", 10.0),
    ],
)
def test_safe_eval_number_values(rw: ModuleType, expr: str, value: float) -> None:
    got = rw.safe_eval_number(expr)
    assert got is not None and math.isclose(got, value, rel_tol=1e-12)


@pytest.mark.parametrize(
    "expr",
    [
        "",
        "   ",
        "12%",
        "1,000",
        "1 000",
        "05",
        "15 degrees",
        "$12",
        "x",
        "e",
        "Pi",
        "I",
        "oo",
        "nan",
        "1j",
        "True",
        "None",
        "'1'",
        "1/0",
        "0/0",
        "0**-1",
        "1 % 0",
        "sqrt(-1)",
        "(-8)**(1/3)",
        "1e308 * 10",
        "1e999",
        "10**400",
        "2^3",
        "3!",
        "0.[3]",
        "exp(1)",
        "Rational(1, 2)",
        "1 if 1 else 2",
        "1 < 2",
        "~1",
        "1 << 3",
        "7 // 2",
        "1 = 1",
        "1 + " * 60 + "1",  # too many nodes
        "-" * 150 + "1",  # too deep
        "1" * 201,  # too long
    ],
)
def test_safe_eval_number_rejects(rw: ModuleType, expr: str) -> None:
    assert rw.safe_eval_number(expr) is None


# --------------------------------------------------------------------------------------------------------------------
# Hostile answers
# --------------------------------------------------------------------------------------------------------------------


def _hostile(marker: Path) -> list[str]:
    touch = f"__import__('os').system('touch {marker}')"
    return [
        touch,
        f"{touch} = around 1",
        f"1 + {touch}",
        f"sqrt({touch})",
        f"(lambda: {touch})()",
        f"[{touch} for _ in [1]]",
        f"open('{marker}', 'w').write('x')",
        f"exec(\"open('{marker}', 'w')\")",
        f'eval("{touch}")',
        "().__class__.__bases__[0].__subclasses__()",
        "(1).__class__",
        "pi.real",
        "sqrt.__globals__",
        "sqrt(2, 3)",
        "sqrt(x=2)",
        "sqrt(*[2])",
        "pi(1)",
        "lambda: 1",
        "lambda x: x",
        "[x for x in range(10**9)]",
        "{x: x for x in range(10**9)}",
        "(x for x in range(10**9))",
        "sum(range(10**12))",
        "__builtins__",
        "globals()",
        "getattr(1, 'real')",
        "[1][0]",
        "{1}",
        "(x := 1)",
        "f'{1}'",
        "b'1'",
        "...",
        "1; import os",
        "import os",
        "\x00",
        "1\x00",
        "9**9**9**9",
        "9**9**9",
        "10**100000",
        "10**-100000",
        "2**1001",
        "(10**99)**99",
        "(2**1000)**(2**1000)",
        "10**999 * 10**999 * 10**999 * 10**999",
        "1.5**1e10",
        "(-1.5)**1e10",
        "(" * 10_000 + "1" + ")" * 10_000,
        "-" * 10_000 + "1",
        "1" + "+1" * 100_000,
        "[" * 100 + "]" * 100,
        "1" * 1_000_000,
        "9" * 1_000_000,
        " = around " * 100_000,
        "(" * 199,
    ]


def test_hostile_answers_execute_nothing(rw: ModuleType, tmp_path: Path) -> None:
    marker = tmp_path / f"pwned_{uuid.uuid4().hex}"
    for answer in _hostile(marker):
        checks: list[tuple[Callable[..., object], tuple[str, ...], object]] = [
            (rw.safe_eval_number, (answer,), None),
            (rw.is_correct, (answer, "1"), False),
            (rw.is_correct, ("1", answer), False),
            (rw.reward, (f"### {answer}", "1"), 0.0),
            (rw.reward, (f"Thinking...\n### {answer} ###", "42"), 0.0),
        ]
        for function, args, expected in checks:
            start = time.perf_counter()
            result = function(*args)
            elapsed = time.perf_counter() - start
            assert result == expected, answer[:80]
            assert type(result) is type(expected)
            assert elapsed < TIME_BOUND_S, (answer[:80], elapsed)
    assert not marker.exists()
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "text",
    [
        "###" + " " * 1_000_000 + "\n\n",  # cubic backtracking for the reference regex
        "### x\ny" + " " * 1_000_000 + "###",
        "###" + " \n" * 500_000 + "\n",
        "###\n\n" * 200_000,
        "#" * 1_000_000,
        "### " + "1" * 1_000_000,
        "x" * 1_000_000,
        "### " + "(" * 1_000_000,
    ],
    ids=lambda text: f"{len(text)}-chars",
)
def test_huge_texts_are_fast(rw: ModuleType, text: str) -> None:
    start = time.perf_counter()
    score = rw.reward(text, "1")
    answer = rw.extract_answer(text)
    assert time.perf_counter() - start < TIME_BOUND_S
    assert score == 0.0
    assert answer is None or isinstance(answer, str)


# --------------------------------------------------------------------------------------------------------------------
# Answer extraction
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("### 42", "42"),
        ("###42", "42"),
        ("The answer is ### 42 ###", "42"),
        ("The answer is ### 42###", "42"),
        ("### 2/3 = around 0.666667", "2/3 = around 0.666667"),
        ("The answer is 42", None),
        ("", None),
        (None, None),
        ("The answer is ###", None),
        ("The answer is ###\n", None),
        ("The answer is ### ", " "),
        ("Step 1: 6 * 7 = 42.\nStep 2: check.\n### 42", "42"),
        ("Reasoning\n### 42\n", "42"),
        ("### 42\nbecause 6 * 7", None),  # `$` only matches at the very end: the reference finds nothing here
        ("### 42\n### 43", "42"),
        ("### first ### second ###", "first"),
        ("###\n\n42", "42"),
        ("#### 42", "# 42"),
        ("## 42", None),
    ],
)
def test_extract_answer(rw: ModuleType, text: str | None, answer: str | None) -> None:
    assert rw.extract_answer(text) == answer
    if text is not None:
        assert oracle_extract(text) == answer
    assert rw.ANSWER_MARKER == "###"


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from(["#", "###", " ", "\n", "\t", "\r", "\u00a0", "\u2028", "\x1c", "a", "4", "2", " 42 "]),
        max_size=16,
    ).map("".join)
)
def test_extract_answer_matches_reference_regex(text: str) -> None:
    assert RW.extract_answer(text) == oracle_extract(text)


# --------------------------------------------------------------------------------------------------------------------
# Fuzzing
# --------------------------------------------------------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.none(), st.text()), st.one_of(st.none(), st.text()))
def test_arbitrary_text_never_raises(text: str | None, truth: str | None) -> None:
    score = RW.reward(text, truth)  # a None truth is tolerated too
    assert score in (0.0, 1.0)
    assert isinstance(RW.is_correct(text, truth), bool)
    value = RW.safe_eval_number(text or "")
    assert value is None or math.isfinite(value)


MATHY = st.text(alphabet="0123456789+-*/%().^!e_ ,#\n=ajpisqrtE", max_size=80)


@settings(max_examples=1000, deadline=None)
@given(MATHY, st.sampled_from(["1", "2/3", "1_540", "C", "0", "5.14"]))
def test_mathy_text_never_raises(text: str, truth: str) -> None:
    start = time.perf_counter()
    assert RW.reward(f"### {text}", truth) in (0.0, 1.0)
    assert isinstance(RW.is_correct(text, truth), bool)
    value = RW.safe_eval_number(text)
    assert value is None or math.isfinite(value)
    assert time.perf_counter() - start < TIME_BOUND_S


def _arithmetic() -> st.SearchStrategy[str]:
    """Trusted arithmetic: small literals, + - * / % and small powers, fully parenthesised.

    Divisors and bases of negative powers are positive literals: for an undefined value (``0/0``, ``1/0``) sympy
    carries ``nan``/``zoo`` along and can make a number of it again (``(0/0)**0 == 1``, ``0.01 % 0 == 0.01``).
    Such quirks are not reproduced: any division by zero makes the whole answer "not a number". Modulo is only
    generated on integers: with decimals it is discontinuous, and sympy mixes exact and binary-float remainders
    (``0.03 % 0.01 == 0`` but ``1 % 0.01 == 0.00999...``) where this implementation is exact.
    """
    positive = st.one_of(
        st.integers(1, 999).map(str),
        st.decimals(min_value="0.01", max_value=100, places=2, allow_nan=False, allow_infinity=False).map(str),
    )
    leaves = st.one_of(
        st.integers(0, 999).map(str),
        st.decimals(min_value=0, max_value=100, places=2, allow_nan=False, allow_infinity=False).map(str),
        st.tuples(positive, st.integers(-3, -1)).map(lambda t: f"{t[0]}**{t[1]}"),
        st.tuples(st.integers(-999, 999), st.integers(1, 99)).map(lambda t: f"({t[0]} % {t[1]})"),
    )

    def extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        binary = st.tuples(children, st.sampled_from(["+", "-", "*"]), children).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        )
        divide = st.tuples(children, positive).map(lambda t: f"({t[0]} / {t[1]})")
        power = st.tuples(children, st.integers(0, 3)).map(lambda t: f"({t[0]})**{t[1]}")
        return st.one_of(binary, divide, power, children.map(lambda c: f"-{c}"))

    return st.recursive(leaves, extend, max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(_arithmetic())
def test_arithmetic_matches_sympy(expr: str) -> None:
    pytest.importorskip("sympy")
    expected = _oracle_value(expr)
    got = RW.safe_eval_number(expr)
    if expected is None:
        assert got is None, expr
    else:
        assert got is not None and math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-12), (expr, got, expected)
