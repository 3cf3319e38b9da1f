"""What one run was asked for beyond its spec: the command line's options, typed.

The runner acts on them, ``run-state.json`` keeps them for ``--resume``, and the manifest records them with their
types (``harness reproduce`` reads them back to run the same thing again).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field


class RunOptions(BaseModel):
    """The options of one run (one seed of one benchmark profile)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmark: str
    profile: str | None = Field(None, description="The spec profile; None: the spec's default.")
    seed: int | None = Field(None, description="The training and sampling seed; None: the spec's first.")
    group_id: str | None = Field(None, description="Shared by the seeds of one `--seeds N` invocation.")
    data_mirror: Path | None = Field(None, description="An offline dataset mirror (<dir>/<dataset>/<file>).")
    skip_baseline: bool = False
    backend: str = Field("local", description="Where processes run: local or docker (auto is resolved before).")
    results_root: Path | None = Field(None, description="The results store; None: HARNESS_RESULTS or results/.")
    ray_address: str | None = Field(None, description="A Ray cluster for verl; None: RAY_ADDRESS or a local head.")
    eval_only: bool = False
    checkpoint: Path | None = Field(None, description="With eval_only: the checkpoint to evaluate.")
    limit: int | None = Field(None, description="Evaluate only the first N tasks (overrides the spec).")
    trials: int | None = Field(None, description="Samples per task (overrides the spec).")
    resume: str | None = Field(None, description="The run id this attempt continues.")

    PATH_FIELDS: ClassVar[frozenset[str]] = frozenset({"data_mirror", "results_root", "checkpoint"})
    REPEATED: ClassVar[dict[str, str]] = {
        "profile": "--profile",
        "seed": "--seed",
        "backend": "--backend",
        "skip_baseline": "--skip-baseline",
        "eval_only": "--eval-only",
        "limit": "--limit",
        "trials": "--trials",
    }
    """The options that decide what a run computes, with their ``harness run`` flags. The others say where it runs
    (paths, a Ray cluster), how it is grouped or which attempt it continues: a re-run sets its own."""

    @classmethod
    def from_recorded(cls, recorded: dict[str, object], **resolved: object) -> RunOptions:
        """The options a manifest recorded (:meth:`recorded`), with ``resolved`` values (the row's profile, seed
        and backend) in place of the recorded ones; paths stay unset (the manifest keeps none)."""
        kept = {k: v for k, v in recorded.items() if k not in cls.PATH_FIELDS and k in cls.model_fields}
        return cls.model_validate({**kept, **resolved})

    def arguments(self) -> list[str]:
        """``harness run`` arguments that ask for this run's computation again: the benchmark and each option of
        :attr:`REPEATED` that is set (flags for the switches that are on)."""
        out = [self.benchmark]
        for name, flag in self.REPEATED.items():
            value = getattr(self, name)
            if value is True:
                out.append(flag)
            elif value is not None and value is not False:
                out += [flag, str(value)]
        return out

    def recorded(self) -> dict[str, object]:
        """The options a manifest records: typed values, paths reduced to ``"<path>"`` (a machine's paths are not
        provenance), unset ones left out."""
        out: dict[str, object] = {}
        for name, value in self.model_dump(mode="json").items():
            if value is None:
                continue
            out[name] = "<path>" if name in self.PATH_FIELDS else value
        return out
