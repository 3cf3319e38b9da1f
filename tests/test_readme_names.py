"""Every name the READMEs (README.md, docker/README.md) and the pages in docs/ give the reader to type exists.

* `harness` options: each `harness <command> ...` in a code block or an inline code span names a registered command
  of the typer app (:data:`harness.cli.app`) and only that command's options; a code span that is only an option
  (`--seeds N`) names an option of some command, unless :data:`FOREIGN_FLAGS` says whose it is.
* `make` targets and variables: each `make ...` names targets of the Makefile (pattern rules included;
  `bench-<name>` only for a folder in benchmarks/) and variables that the Makefile or its scripts read.
* `HARNESS_*` variables: each one occurs in the project's sources (harness/, benchmarks/, scripts/, tests/, bench/,
  docker/ but its README, .ci/, compose.yaml, Makefile), literally or as a name the code builds
  (``f"HARNESS_ENV_{name}"``); a template (`HARNESS_TOOL_<NAME>_CMD`, `HARNESS_ENV_*`) matches one of those.
* The synopsis under "The `harness` command" lists every option of every command, and the short forms.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import typer

from harness.cli import app
from support import REPO

DOCS = (REPO / "README.md", REPO / "docker" / "README.md", *sorted((REPO / "docs").glob("*.md")))

FOREIGN_FLAGS: dict[str, str] = {
    # option: whose it is (the READMEs name it in a code span of its own, beside the tool's name in the text)
    "-m": "pytest",
    "-k": "pytest",
    "-r": "pip",
    "--kv-cache-memory-bytes": "vLLM's server",
    "--gpu-memory-utilization": "vLLM's server",
    "--no-enable-chunked-prefill": "vLLM's server",
    "--require-hashes": "pip",
    "--no-deps": "pip",
    "--target": "pip",
    "--platform": "pip download",
    "--find-links": "pip",
    "--overrides": "uv pip compile",
    "--upgrade-package": "uv pip compile",
    "--user": "docker run",
    "--network": "docker run",
    "--memory": "docker run",
    "--cpus": "docker run",
    "--spin": "bench/cpu_sharing.py",
    "--check": "bench/reference_anchor.py",
    "--steps": "bench/reference_anchor.py",
    "--log": "bench/reference_anchor.py",
    "--verl-only": "bench/verl_speed.py",
    "--debug": "the reference math sample",
}
"""Options of other programs that the READMEs name in a code span without the program; those of a file in this
repository are checked to occur in it, and an entry no README needs any more fails the test."""

SOURCES = ("harness", "benchmarks", "scripts", "tests", "bench", "docker", ".ci", "compose.yaml", "Makefile")
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
HARNESS_CALL = re.compile(r"(?:^|[\s/(\"'])harness\s+([a-z][\w-]*)(.*)", re.S)
MAKE_CALL = re.compile(r"(?:^|[\s(\"'])make\s+(.*)", re.S)
HARNESS_NAME = re.compile(r"HARNESS_[A-Z0-9_]*(?:(?:<[A-Z_]+>|\*)[A-Z0-9_]*)*")
BUILT_NAME = re.compile(r"HARNESS_[A-Z0-9_]*\{[^}\n]*\}[A-Z0-9_]*")


@dataclass(frozen=True)
class Fragment:
    """Code as the README shows it: a line of a code block (with its indented continuation lines) or a span."""

    doc: str
    line: int
    text: str

    def where(self) -> str:
        return f"{self.doc}:{self.line}: {self.text.strip()[:100]!r}"


def shown(path: Path) -> str:
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)


def fragments(path: Path) -> list[Fragment]:
    return fragments_of(path.read_text(encoding="utf-8"), path)


def fragments_of(text: str, path: Path) -> list[Fragment]:
    """The code of ``text`` (from ``path``): fenced blocks line by line (an indented line continues the one before),
    then the inline code spans of the rest (a span may wrap onto the next line)."""
    name = shown(path)
    out: list[Fragment] = []
    prose: list[str] = []
    block: list[tuple[int, str]] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            if block is not None:
                out += [Fragment(name, n, t) for n, t in block]
                block = None
            else:
                block = []
            prose.append("")
            continue
        prose.append(line if block is None else "")  # keeps the line numbers of the spans
        if block is None:
            continue
        if line[:1].isspace() and block and line.strip():
            block[-1] = (block[-1][0], block[-1][1] + " " + line.strip())
        else:
            block.append((number, line))
    rest = "\n".join(prose)
    for span in re.finditer(r"`([^`]+)`", rest):
        if "\n\n" not in span.group(1):
            line = rest.count("\n", 0, span.start()) + 1
            out.append(Fragment(name, line, " ".join(span.group(1).split())))
    return out


def command_part(text: str) -> str:
    """A shell command without what follows it: a comment, `&&`, `;`, `|`, a closing parenthesis."""
    return re.split(r"\s#\s|&&|;|\|\||\)", text)[0]


def registered() -> dict[str, Any]:
    """The typer app's commands as Click sees them (Typer carries its own copy of Click, hence no isinstance)."""
    group = typer.main.get_command(app)
    found: dict[str, Any] = getattr(group, "commands", {})
    assert found, "harness.cli.app has no commands"
    return found


def options(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "option"]


@cache
def commands() -> dict[str, set[str]]:
    """Every registered `harness` command and its options (long and short forms, --help included)."""
    return {
        name: {"--help"}.union(*(set(o.opts) | set(o.secondary_opts) for o in options(command)))
        for name, command in registered().items()
    }


def harness_calls(doc: Path) -> Iterator[tuple[Fragment, str, list[str]]]:
    """(fragment, command, options) for each `harness <command> ...` in ``doc``."""
    for fragment in fragments(doc):
        for call in HARNESS_CALL.finditer(command_part(fragment.text)):
            yield fragment, call.group(1), FLAG.findall(call.group(2))


def standalone_flags(doc: Path) -> Iterator[tuple[Fragment, list[str]]]:
    """The options of each code span that starts with an option (`--seeds N`, `--no-deps --require-hashes`)."""
    for fragment in fragments(doc):
        if fragment.text.startswith("-") and FLAG.match(fragment.text):
            yield fragment, FLAG.findall(fragment.text)


def name_problems(docs: tuple[Path, ...]) -> list[str]:
    """What the docs name that does not exist, one line each."""
    problems: list[str] = []
    known = commands()
    every_option = set().union(*known.values())
    for doc in docs:
        for fragment, command, flags in harness_calls(doc):
            if command not in known:
                problems.append(f"{fragment.where()}: no command `harness {command}`")
                continue
            problems += [
                f"{fragment.where()}: `harness {command}` has no {f}" for f in flags if f not in known[command]
            ]
        for fragment, flags in standalone_flags(doc):
            for flag in flags:
                owner = FOREIGN_FLAGS.get(flag)
                if owner is None and flag not in every_option:
                    problems.append(f"{fragment.where()}: no `harness` command has {flag}")
                elif owner is not None and (REPO / owner).is_file() and flag not in (REPO / owner).read_text():
                    problems.append(f"{fragment.where()}: {owner} has no {flag}")
        problems += make_problems(doc)
        problems += variable_problems(doc)
    return problems


# ---------------------------------------------------------------------------------------------------- make


@cache
def makefile() -> tuple[set[str], list[str], str]:
    """The Makefile's targets, its pattern targets, and the text of the Makefile and the scripts its rules run."""
    text = (REPO / "Makefile").read_text()
    targets: set[str] = set()
    for match in re.finditer(r"^([^\s#:=.$][^:=\n]*?)\s*:(?!=)", text, re.M):
        targets.update(match.group(1).split())
    patterns = sorted(t for t in targets if "%" in t)
    scripts = "".join(p.read_text() for p in sorted((REPO / "scripts").glob("*.sh")))
    return targets - set(patterns), patterns, text + scripts


def target_problem(target: str) -> str | None:
    targets, patterns, _ = makefile()
    if target in targets:
        return None
    for pattern in patterns:
        prefix, _, suffix = pattern.partition("%")
        if target.startswith(prefix) and target.endswith(suffix) and len(target) > len(prefix + suffix):
            stem = target[len(prefix) : len(target) - len(suffix)]
            if pattern == "bench-%" and not stem.startswith("<") and not (REPO / "benchmarks" / stem).is_dir():
                return f"`make {target}`: no benchmark folder benchmarks/{stem}/"
            return None
    return f"no make target {target}"


def make_problems(doc: Path) -> list[str]:
    _, _, text = makefile()
    problems = []
    for fragment in fragments(doc):
        for call in MAKE_CALL.finditer(command_part(fragment.text)):
            for word in call.group(1).split():
                word = word.strip("[]")
                if not word or word.startswith("-") or word == "|":
                    continue
                name, is_variable, _ = word.partition("=")
                if is_variable:
                    if not re.search(rf"\$[({{]{name}\b|^{name}\s*[?:+]?=", text, re.M):
                        problems.append(f"{fragment.where()}: neither the Makefile nor its scripts read {name}")
                elif re.fullmatch(r"[\w.<>%-]+", word) and (problem := target_problem(word)):
                    problems.append(f"{fragment.where()}: {problem}")
                elif not re.fullmatch(r"[\w.<>%-]+", word):
                    break  # the command's arguments end here (prose in a span)
    return problems


# ---------------------------------------------------------------------------------------------------- HARNESS_*


@cache
def source_names() -> tuple[set[str], list[re.Pattern[str]]]:
    """``HARNESS_*`` names written in the sources, and the shapes of those the code builds (``f"HARNESS_ENV_{x}"``)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *SOURCES],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    literal: set[str] = set()
    built: list[re.Pattern[str]] = []
    for name in listed:
        path = REPO / name
        if path.suffix == ".md" or path.name == Path(__file__).name or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        literal.update(re.findall(r"HARNESS_[A-Z0-9_]*[A-Z0-9]", text))
        for shape in BUILT_NAME.findall(text):
            parts = re.split(r"\{[^}]*\}", shape)
            built.append(re.compile("[A-Z0-9_]+".join(re.escape(p) for p in parts)))
    return literal, built


def variable_problem(name: str) -> str | None:
    literal, built = source_names()
    if "<" not in name and "*" not in name:
        if name in literal or any(p.fullmatch(name) for p in built):
            return None
        return f"{name} occurs in no source file"
    template = re.compile("[A-Z0-9_]+".join(re.escape(p) for p in re.split(r"<[A-Z_]+>|\*", name)))
    instance = re.sub(r"<[A-Z_]+>|\*", "X", name)
    if any(template.fullmatch(n) for n in literal) or any(p.fullmatch(instance) for p in built):
        return None
    return f"no source name fits {name}"


def variable_problems(doc: Path) -> list[str]:
    text = doc.read_text(encoding="utf-8")
    problems = []
    for match in HARNESS_NAME.finditer(text):
        if problem := variable_problem(match.group(0)):
            problems.append(f"{shown(doc)}:{text.count(chr(10), 0, match.start()) + 1}: {problem}")
    return problems


# ---------------------------------------------------------------------------------------------------- tests


def test_the_readmes_name_only_options_targets_and_variables_that_exist() -> None:
    problems = name_problems(DOCS)
    assert not problems, "\n".join(problems)
    named = {flag for doc in DOCS for _, flags in standalone_flags(doc) for flag in flags}
    assert not set(FOREIGN_FLAGS) - named, f"FOREIGN_FLAGS that no README names: {set(FOREIGN_FLAGS) - named}"


def test_the_synopsis_lists_every_option_of_every_command() -> None:
    readme = DOCS[0]
    text = readme.read_text(encoding="utf-8")
    section = text[text.index("## The `harness` command") :]
    section = section[: section.index("\n### ")]
    words = " ".join(section.split())
    listed: dict[str, set[str]] = {}
    for fragment in fragments_of(section, readme):
        for call in HARNESS_CALL.finditer(command_part(fragment.text)):
            listed.setdefault(call.group(1), set()).update(FLAG.findall(call.group(2)))
    missing = []
    for name, command in registered().items():
        if name not in listed:
            missing.append(f"harness {name}")
            continue
        for option in options(command):
            longs = [o for o in option.opts if o.startswith("--")]
            if not set(longs) & listed[name]:
                missing.append(f"harness {name} {longs[0]}")
            shorts = [o for o in option.opts if not o.startswith("--")]
            missing += [f"the short form {o} of {longs[0]}" for o in shorts if f"`{o}` for `{longs[0]}`" not in words]
    assert not missing, f"the synopsis lacks: {', '.join(missing)}"


BOGUS = """# A page with a name of each kind that does not exist

```
harness run math --profile smoke --no-such-flag
harness frobnicate math
make bench-math SEEDS=2 NO_SUCH_VARIABLE=1
make no-such-target
make bench-no-such-benchmark
```

Also `harness compare A B --skip-baseline` (an option of another command), `--no-such-option`, `--spin`, and
`HARNESS_NO_SUCH_VARIABLE`, `HARNESS_NO_SUCH_<NAME>_CMD`; but `harness run --resume RUN_ID`, `make bench-<name>`,
`HARNESS_DATA_MIRROR`, `HARNESS_ENV_SERVE_CPU` and `HARNESS_TOOL_<NAME>_CMD` exist.
"""


def test_names_that_do_not_exist_are_reported(tmp_path: Path) -> None:
    page = tmp_path / "bogus.md"
    page.write_text(BOGUS)
    problems = "\n".join(name_problems((page,)))
    for expected in (
        "`harness run` has no --no-such-flag",
        "no command `harness frobnicate`",
        "neither the Makefile nor its scripts read NO_SUCH_VARIABLE",
        "no make target no-such-target",
        "no benchmark folder benchmarks/no-such-benchmark/",
        "`harness compare` has no --skip-baseline",
        "no `harness` command has --no-such-option",
        "HARNESS_NO_SUCH_VARIABLE occurs in no source file",
        "no source name fits HARNESS_NO_SUCH_<NAME>_CMD",
    ):
        assert expected in problems, problems
    assert len(problems.splitlines()) == 9, problems
