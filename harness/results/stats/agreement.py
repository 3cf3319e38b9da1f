"""Does a reproduced run agree with the run it reproduces?

* Both on the same CPU and no GPU (the rows' hardware names the same core count, CPU model, family/model/stepping
  and instruction-set features, and ``gpu: none``), where training is bit-deterministic: the trained checkpoints'
  hashes are identical and so is every outcome (phase, task, sample, reward, pass, error kind).
* Otherwise (a GPU, or two different CPUs, or a row recorded before the harness named the CPU precisely): CPU
  kernels differ between processors (vector widths, bf16 units), so bits are not expected to match; the paired test
  of the two runs' final phases must find no difference (mark ``~``) and the two pass-rate intervals overlap.

The verdict says which criterion it applied and why.

Before either, the inputs must be the same: spec hash, dataset hash, base-model hash, seed and profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.results.stats.aggregate import pool
from harness.results.stats.paired import paired_difference
from harness.results.stats.summary import summarize_counts
from harness.results.store.codec import OutcomeRecords
from harness.results.store.schema import RunRow

SAME_INPUTS = ("profile", "seed", "spec_hash", "dataset_sha256", "model_hash_before")


@dataclass
class Agreement:
    """The verdict and the lines that explain it."""

    agrees: bool
    method: str
    details: list[str] = field(default_factory=list)


def _outcome_set(records: OutcomeRecords) -> list[tuple[str, str, int, float, bool, str]]:
    return sorted(
        zip(
            records.phase,
            records.task_id,
            records.sample,
            records.reward,
            records.passed,
            records.error_kind,
            strict=True,
        )
    )


def on_cpu(row: RunRow) -> bool:
    """Whether the run's hardware had no GPU."""
    return "gpu: none" in row.hardware


def cpu_of(row: RunRow) -> str:
    """The row's cores and CPU identity (the hardware line's first part)."""
    return row.hardware.split("; ")[0]


def same_cpu(a: RunRow, b: RunRow) -> bool:
    """Both rows name the same CPU precisely (identity with family/model/stepping and features: ``[...]``)."""
    return "[" in cpu_of(a) and cpu_of(a) == cpu_of(b)


def criterion(a: RunRow, b: RunRow) -> tuple[bool, str]:
    """Whether bit-identical results are expected, and why (or why not)."""
    if not (on_cpu(a) and on_cpu(b)):
        return False, "a GPU ran at least one of them: agreement within noise is expected, not the same bits"
    if same_cpu(a, b):
        return True, f"both on {cpu_of(a)} without a GPU: CPU training is bit-deterministic there"
    if "[" not in cpu_of(a) or "[" not in cpu_of(b):
        return False, (
            f"the CPUs cannot be told apart precisely ({cpu_of(a)} vs {cpu_of(b)}): bits are expected to match only "
            "on the same CPU and kernels, so the statistical criterion applies"
        )
    return False, (
        f"different CPUs ({cpu_of(a)} vs {cpu_of(b)}): CPU kernels differ between processors, so the bits may too; "
        "the statistical criterion applies"
    )


def agreement(original: RunRow, repro: RunRow, a: OutcomeRecords, b: OutcomeRecords, alpha: float = 0.05) -> Agreement:
    """Compare ``repro`` (with outcomes ``b``) to ``original`` (with outcomes ``a``)."""
    details = [
        f"{name} differs: {getattr(original, name)!s:.16} vs {getattr(repro, name)!s:.16}"
        for name in SAME_INPUTS
        if getattr(original, name) != getattr(repro, name)
    ]
    if repro.status != "complete":
        details.append(f"the reproduction is {repro.status} (phase {repro.failed_phase})")
    if details:
        return Agreement(False, "same inputs", details)
    bitwise, why = criterion(original, repro)
    details.append(f"criterion: {why}")
    if bitwise:
        same_model = original.model_hash_after == repro.model_hash_after
        same_outcomes = _outcome_set(a) == _outcome_set(b)
        details.append(
            f"trained checkpoint {original.model_hash_after[:12] or 'none'} vs {repro.model_hash_after[:12] or 'none'}"
            f": {'identical' if same_model else 'different'}"
        )
        details.append(f"{len(a)} vs {len(b)} outcomes: {'identical' if same_outcomes else 'different'}")
        return Agreement(same_model and same_outcomes, "CPU: identical checkpoint and outcomes", details)
    ca, cb = pool(a), pool(b)
    common = sorted(set(ca.task_ids) & set(cb.task_ids))
    if not common:
        return Agreement(False, "paired test", ["no task has data in both runs"])
    pa, pb = ca.select(common), cb.select(common)
    paired = paired_difference(pa.successes, pa.trials, pb.successes, pb.trials, alpha)
    sa, sb = summarize_counts(ca, 1 - alpha), summarize_counts(cb, 1 - alpha)
    assert sa.ci is not None and sb.ci is not None
    overlap = sa.ci[0] <= sb.ci[1] and sb.ci[0] <= sa.ci[1]
    no_difference = paired.p_value >= alpha
    details.append(
        f"B - A {100 * paired.diff:+.1f} pp [{100 * paired.low:.1f}, {100 * paired.high:.1f}] over {len(common)} "
        f"tasks, p = {paired.p_value:.4f} ({paired.test}): {'no difference' if no_difference else 'different'}"
    )
    details.append(
        f"pass rate {100 * (sa.pass_rate or 0):.1f}% [{100 * sa.ci[0]:.1f}, {100 * sa.ci[1]:.1f}] vs "
        f"{100 * (sb.pass_rate or 0):.1f}% [{100 * sb.ci[0]:.1f}, {100 * sb.ci[1]:.1f}]: "
        f"intervals {'overlap' if overlap else 'do not overlap'}"
    )
    return Agreement(no_difference and overlap, "paired test and overlapping intervals", details)
