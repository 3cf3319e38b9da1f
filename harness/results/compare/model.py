"""The result of ``harness compare``: one :class:`PairComparison` per benchmark/profile, each side's
:class:`SideSummary`, and the whole :class:`Comparison` (what the renderers print and the JSON output holds)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Mark = Literal["+", "-", "~", "x"]
Units = Literal["tasks", "seeds", "seed pairs"]


class SideSummary(BaseModel):
    """One side of one (benchmark, profile) pair."""

    label: str = Field(description="The source's label (revision, worktree or run list).")
    run_ids: list[str] = Field(description="Runs pooled on this side.")
    git_commits: list[str] = Field(description="Distinct git commits of those runs.")
    phases: list[str] = Field(description="Phases used (after when the runs trained, else before).")
    dataset_sha256: str = Field(description="Dataset hash of the runs.")
    eval_split: str = Field(description="Evaluation split of the runs.")
    n_tasks_declared: int = Field(description="n_tasks recorded in the run rows.")
    n_tasks: int = Field(description="Tasks with at least one non-infra sample.")
    n_samples: int = Field(description="Non-infra samples pooled over runs.")
    infra_errors: int = Field(description="Samples excluded as infrastructure errors.")
    tasks_without_data: int = Field(description="Tasks whose every sample was an infrastructure error.")
    pass_rate: float | None = Field(description="Mean over tasks of the task pass fraction.")
    ci_low: float | None = Field(description="Lower CI bound of pass_rate.")
    ci_high: float | None = Field(description="Upper CI bound of pass_rate.")
    ci_method: str = Field(description="wilson (one sample per task) or wilson-design-effect (several).")
    pass_hat_k: dict[int, float] = Field(description="pass^k (tau-bench) for k = 1 .. min(trials per task, 16).")


class PairComparison(BaseModel):
    """The comparison of one (benchmark, profile) between the two sources."""

    benchmark: str = Field(description="Benchmark name.")
    profile: str = Field(description="Spec profile.")
    a: SideSummary | None = Field(description="Side A (None when A has no runs for this pair).")
    b: SideSummary | None = Field(description="Side B (None when B has no runs for this pair).")
    mark: Mark = Field(description="+ improvement, - regression, ~ not significant, x not comparable.")
    reason: str = Field(default="", description="Why the pair is not comparable (mark x).")
    n_paired_tasks: int = Field(default=0, description="Tasks with data on both sides.")
    diff: float | None = Field(default=None, description="Mean over paired tasks of B - A pass fraction.")
    diff_ci_low: float | None = Field(default=None, description="CI of diff (inverts the paired test), lower bound.")
    diff_ci_high: float | None = Field(default=None, description="CI of diff, upper bound.")
    diff_ci_method: str = Field(default="", description="How the CI of diff was computed.")
    a_paired_pass: float | None = Field(default=None, description="A's pass rate over the paired tasks only.")
    b_paired_pass: float | None = Field(default=None, description="B's pass rate over the paired tasks only.")
    p_value: float | None = Field(default=None, description="Two-sided p-value of the test that set the mark.")
    test: str = Field(default="", description="Which test produced p_value.")
    units: Units = Field(
        default="tasks",
        description="The test's replicates: tasks (paired; one model a side, or untrained evaluations), training "
        "seeds (trained models of different runs: a permutation test over the seeds' pass rates) or seed pairs (the "
        "same runs of several seeds before and after training: a t-test over the seeds' gains).",
    )
    seeds_a: int = Field(default=0, description="Distinct training seeds on side A (units seeds).")
    seeds_b: int = Field(default=0, description="Distinct training seeds on side B (units seeds).")
    min_p_value: float | None = Field(default=None, description="The smallest p the test over seeds can give.")
    seed_gains: list[float] = Field(
        default_factory=list, description="Units seed pairs: each seed's B - A pass rate, seeds in order."
    )
    task_p_value: float | None = Field(
        default=None, description="The paired test over tasks: evaluation noise only (p_value itself for tasks)."
    )
    detectable_gain: float | None = Field(
        default=None, description="For ~: the smallest gain this pair's own test detects with 80% power (None: none)."
    )
    detectable_note: str = Field(default="", description="For ~: what the pair could have told, in words.")
    power_assumptions: str = Field(default="", description="For ~: the power simulation's assumptions.")
    seed_sd: float | None = Field(default=None, description="For ~ over seeds: the between-seed sd assumed.")
    seeds_needed: int | None = Field(
        default=None, description="For ~ over too few seeds: the seeds a side the observed difference needs."
    )
    warnings: list[str] = Field(default_factory=list, description="Runs pooled that did not complete, and similar.")
    new_failures: list[str] = Field(default_factory=list, description="Tasks solved on A but not on B.")
    fixed: list[str] = Field(default_factory=list, description="Tasks solved on B but not on A.")


class Comparison(BaseModel):
    """Result of :func:`compare`."""

    a_label: str = Field(description="Label of side A.")
    b_label: str = Field(description="Label of side B.")
    alpha: float = Field(description="Significance level; CIs are at 1 - alpha.")
    pairs: list[PairComparison] = Field(description="One entry per (benchmark, profile) on either side.")

    @property
    def regressions(self) -> int:
        """Number of significant regressions (mark ``-``)."""
        return sum(p.mark == "-" for p in self.pairs)

    @property
    def improvements(self) -> int:
        """Number of significant improvements (mark ``+``)."""
        return sum(p.mark == "+" for p in self.pairs)

    @property
    def not_comparable(self) -> int:
        """Number of pairs that could not be compared (mark ``x``)."""
        return sum(p.mark == "x" for p in self.pairs)
