"""`harness report`: files, plots with real content, and rendering in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import typer
from matplotlib.figure import Figure
from matplotlib.image import imread
from results_factories import commit_all, git, init_repo, make_row, outcomes_from, record
from typer.testing import CliRunner

from harness.results.cli import register
from harness.results.compare.compare import compare
from harness.results.compare.render import ci, pct
from harness.results.report import plots
from harness.results.report.report import ReportFiles, build_report, order_commits
from harness.results.store.manifest import Manifest
from harness.results.store.sources import parse_source
from harness.results.store.store import ResultStore

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def add_run(store: ResultStore, run_id: str, commit: str, day: int, before: int, after: int, seed: int) -> None:
    """A trained run on 20 tasks: ``before`` then ``after`` tasks pass; manifest with training curves."""
    outcomes = outcomes_from([i < before for i in range(20)], phase="before") + outcomes_from(
        [i < after for i in range(20)], phase="after"
    )
    row = make_row(run_id, outcomes, git_commit=commit, seed=seed, started_at=f"2025-03-{day:02d}T0{seed}:00:00Z")
    metrics = [
        {"step": s, "reward_mean": 0.2 + 0.03 * s + 0.01 * seed, **({"val_pass": 0.3 + 0.02 * s} if s % 5 == 0 else {})}
        for s in range(21)
    ]
    store.append_run(row, outcomes, Manifest.for_row(row).model_copy(update={"train_metrics": metrics}))


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """Three measured code commits, two seeds each, committed result tables; returns the results folder."""
    repo = init_repo(tmp_path / "repo")
    store = ResultStore(repo / "results")
    for n, (before, after) in enumerate([(6, 10), (6, 14), (6, 9)]):
        code = git(repo, "rev-parse", "HEAD")
        for seed in range(2):
            add_run(store, f"run-{n}-{seed}", code, 10 + n, before, after + seed, seed)
        (repo / "code.py").write_text(f"VERSION = {n + 1}\n")
        commit_all(repo, f"code v{n + 1} + results")
    store.append_run(make_row("late", status="incomplete", started_at="2025-03-20T00:00:00Z"), [])
    return repo / "results"


def distinct_pixels(path: Path) -> int:
    image = imread(path)
    return len(np.unique(image.reshape(-1, image.shape[-1]) if image.ndim == 3 else image.ravel(), axis=0))


def check_files(files: ReportFiles) -> str:
    html = files.html.read_text()
    markdown = files.markdown.read_text()
    assert files.images
    for image in files.images:
        assert image.parent == files.html.parent
        assert image.stat().st_size > 1000
        assert distinct_pixels(image) > 1, image
        assert f'src="{image.name}"' in html
        assert f"]({image.name})" in markdown
    srcs = re.findall(r'src="([^"]+)"', html)
    assert all("/" not in s and ":" not in s for s in srcs)  # relative, same folder
    for external in ("http://", "https://", "<script", "<link"):
        assert external not in html
    return html


def test_report_files_and_plots(history: Path, tmp_path: Path) -> None:
    files = build_report(tmp_path / "out", root=history)
    names = sorted(p.name for p in files.images)
    assert names == [
        "math-smoke-before-after.png",
        "math-smoke-pass-by-commit.png",
        "math-smoke-tasks.png",
        "math-smoke-training.png",
    ]
    html = check_files(files)
    assert "git order" in html
    assert "7 runs: 6 complete, 0 failed, 1 incomplete" in html
    markdown = files.markdown.read_text()
    assert markdown.startswith("# Results report\n")
    # default win/loss: the last two measured commits (14/15 -> 9/10 tasks): tasks 9..13 are new failures
    assert "New failures (5): t009, t010, t011, t012, t013" in markdown


def test_report_against_a_revision(history: Path, tmp_path: Path) -> None:
    files = build_report(tmp_path / "out", root=history, against="HEAD~1")
    html = check_files(files)
    assert "Comparison: HEAD~1" in html
    assert "Per task: HEAD~1" in html


def test_commit_order_falls_back_to_start_time_without_git(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    for n, commit in enumerate(["b" * 40, "a" * 40]):
        add_run(store, f"r{n}", commit, 10 + n, 3, 5, 0)
    commits, order = order_commits(store.runs(), None)
    assert commits == ["b" * 40, "a" * 40] and order == "first run start time"
    files = build_report(tmp_path / "out", root=store.root)
    assert "first run start time" in check_files(files)


def test_a_commits_runs_are_pooled_as_compare_pools_them(tmp_path: Path) -> None:
    """The per-commit table pools a commit's runs by task through the shared statistics: its pass rate and CI are
    what `harness compare` gives that set of runs, not the mean of the runs' own rates (50% here)."""
    store = ResultStore(tmp_path / "results")
    commit = "a" * 40
    record(store, "r1", [True, True, False, False], git_commit=commit)
    outcomes = outcomes_from([True, False, False, False], infra=[(2, 0), (3, 0)])  # half of r2 lost to infra
    store.append_run(make_row("r2", outcomes, git_commit=commit), outcomes)
    assert [r.final_pass for r in store.runs()] == [0.5, 0.5]
    side = compare(parse_source("run:r1,r2", store.root), parse_source("run:r1", store.root)).pairs[0].a
    assert side is not None and side.pass_rate == 0.375  # tasks: 2/2, 1/2, 0/1, 0/1
    row = f"| {commit[:10]} | 1 | 2 | {pct(side.pass_rate)} | {ci(side.ci_low, side.ci_high)} | one seed |"
    markdown = build_report(tmp_path / "out", root=store.root).markdown.read_text()
    assert row in markdown, markdown


def test_the_per_commit_view_shows_the_seed_spread_and_joins_no_commits(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each commit's two seeds (10 and 11 of 20 tasks after training, ...) show as a range; no line runs through the
    commits' rates, whose differences may be seed luck."""
    figures: dict[str, Figure] = {}
    save = plots._save

    def keep(fig: Figure, path: Path) -> Path:
        figures[path.name] = fig
        return save(fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    markdown = build_report(tmp_path / "out", root=history).markdown.read_text()
    assert "| seeds | runs | pass rate (pooled) | 95% CI | seed range (min–max) |" in markdown
    assert "| 2 | 2 | 52.5% |" in markdown and "| 50.0% – 55.0% |" in markdown
    (ax,) = figures["math-smoke-pass-by-commit.png"].axes
    assert all(line.get_linestyle() == "None" for line in ax.get_lines())  # markers only
    assert len(ax.collections) >= 3  # the seed ranges (and the runs' error bars)


def test_report_command(history: Path, tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    out = tmp_path / "cli-report"
    result = CliRunner().invoke(
        app, ["report", "--out", str(out), "--benchmark", "math"], env={"HARNESS_RESULTS": str(history)}
    )
    assert result.exit_code == 0, result.output
    assert (out / "report.html").exists() and (out / "report.md").exists()
    assert "4 plots" in result.stdout


def test_empty_store_report(tmp_path: Path) -> None:
    files = build_report(tmp_path / "out", root=tmp_path / "nothing")
    assert files.images == []
    assert "No runs recorded." in files.html.read_text()


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (Debian package chromium; CI installs it)")
def test_report_renders_in_headless_chromium(history: Path, tmp_path: Path) -> None:
    files = build_report(tmp_path / "out", root=history)
    profile = tmp_path / "chromium-profile"
    base = [str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [*base, f"--screenshot={shot}", "--window-size=1200,2400", files.html.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.exists(), proc.stderr[-2000:]
    assert distinct_pixels(shot) > 10
    # every image must load: a copy of the page records naturalWidth of each <img> once loaded
    probe = files.html.with_name("probe.html")
    script = (
        "<script>window.addEventListener('load', () => { const p = document.createElement('pre'); p.id = 'probe';"
        " p.textContent = JSON.stringify([...document.images].map(i => [i.getAttribute('src'), i.naturalWidth]));"
        " document.body.appendChild(p); });</script>"
    )
    probe.write_text(files.html.read_text().replace("</body>", script + "</body>"))
    dom = subprocess.run(
        [*base, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom.stdout)
    assert found, dom.stderr[-2000:]
    loaded = json.loads(found.group(1).replace("&quot;", '"'))
    assert sorted(src for src, _ in loaded) == sorted(p.name for p in files.images)
    assert all(width > 0 for _, width in loaded), loaded
    shutil.rmtree(profile, ignore_errors=True)
