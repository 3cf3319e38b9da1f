"""The provenance manifest of a run (``results/<benchmark>/manifests/<run_id>.json``): one typed, versioned model
shared by its writer (:mod:`harness.run.record`) and every reader (``harness reproduce``, the report, the tests).

Format 2 records the run's options with their types (format 1 stringified them: ``"True"``, ``"None"``); format 3
adds ``power``, what the run could detect, worked out before it ran (older manifests read as ``None``). A
manifest is read through :func:`parse_manifest`, which upgrades older formats step by step and refuses newer ones,
as the result rows are (:mod:`harness.results.store.upgrade`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from harness.errors import ResultsError
from harness.records import Versions
from harness.results.store.schema import RunRow
from harness.results.store.upgrade import upgrade_row

MANIFEST_VERSION = 3


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PhaseSummary(_Record):
    """One evaluation's figures (the same statistics as ``harness compare``)."""

    pass_rate: float | None = None
    ci: tuple[float, float] | None = None
    n_scored: int = 0
    n_passed: int = 0
    infra_errors: int = 0
    agent_errors: int = 0
    wall_s: float = 0.0
    pass_hat_k: dict[int, float] = Field(default_factory=dict)
    """pass^k over the tasks with scored trials (k = 1 .. their fewest scored trials, at most 16)."""
    failures: dict[str, int] = Field(default_factory=dict)
    """Scored samples the benchmark failed for a reason of its own, by kind (``info["failure"]`` of the episode: a
    reply refused before scoring, a checker failure the reply caused, ...)."""


class SpecRecord(_Record):
    path: str = Field(description="The spec file, relative to the repository.")
    profile: str
    hash: str
    resolved: dict[str, Any] = Field(description="The resolved spec (base merged with the profile) as JSON.")
    version: int = 1
    benchmark_folder_sha256: str = ""


class ArgsRecord(_Record):
    as_passed: dict[str, str | int | bool] = Field(
        default_factory=dict, description="The run's options as typed values (paths as '<path>'), unset ones left out."
    )
    resolved: dict[str, str | int | bool] = Field(
        default_factory=dict,
        description="The options the run used: as passed, with the profile and seed it resolved (what `harness "
        "reproduce` rebuilds its command from); empty in manifests written before it was recorded.",
    )


class SplitRecord(_Record):
    """Which rows of its file a split is: the selection the spec gives (none: the whole file) and a hash of the
    selected rows, in order, so two runs can tell that they used the same split."""

    select: dict[str, Any] | None = Field(
        None, description="The spec's selection (a seeded shuffle, an ids file, or both)."
    )
    rows: int = 0
    rows_sha256: str = Field("", description="sha256 of the selected rows as canonical JSON lines, in order.")


class DatasetRecord(_Record):
    name: str
    source: str
    sha256: dict[str, str] = Field(default_factory=dict, description="Split -> sha256 of its file.")
    splits: dict[str, SplitRecord] = Field(default_factory=dict, description="Split -> the rows selected from it.")


class ModelRecord(_Record):
    name: str
    hash_before: str = ""
    hash_after: str = ""
    source: dict[str, Any] = Field(default_factory=dict, description="Where the checkpoint came from (package, GGUF).")


class EngineRecord(_Record):
    name: str
    steps: int = 0
    resumed_from_step: int = 0
    tensorboard: str = Field("", description="The training curves' folder, relative to the run folder.")
    precision: str = ""


class DockerEngineRecord(_Record):
    version: str = ""
    api_version: str = ""


class ImageRecord(_Record):
    """A container image that ran, pinned by id."""

    ref: str
    id: str
    digest: str = Field(description="The first repository digest, else the image id.")
    repo_digests: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    content_hash: str = Field("", description="The image's io.harness.content-hash label.")


class BackendRecord(_Record):
    """Where the run's processes ran: the backend, and for containers the engine and the images by role."""

    name: str
    engine: DockerEngineRecord | None = None
    images: dict[str, ImageRecord] = Field(default_factory=dict)


class ServingRecord(_Record):
    """The policy server's starts and weight loads."""

    dtype: str = Field("", description="The dtype served (the spec's serving.dtype resolved on this machine).")
    starts: int = 0
    weight_loads: int = 0
    weight_load_s: list[float] = Field(default_factory=list)
    weight_load_failures: list[str] = Field(default_factory=list)
    reload_weights: bool = False
    keep_during_training: bool = False


class ProcessMemory(_Record):
    process: str
    pss_bytes: int


class ResourcesRecord(_Record):
    """Peak memory of the run's process tree, the phase that was running then and its largest processes."""

    peak_pss_bytes: int
    peak_rss_bytes: int
    peak_phase: str
    peak_at_s: float
    peak_processes: int
    peak_top: list[ProcessMemory] = Field(default_factory=list)
    interval_s: float
    samples: int
    scope: str


class PhasesRecord(_Record):
    wall_s: dict[str, float] = Field(default_factory=dict)
    before: PhaseSummary | None = None
    after: PhaseSummary | None = None


class ResumeRecord(_Record):
    resumed_from: str = ""
    run_dir: str = ""
    attempts: list[str] = Field(default_factory=list)
    phases_done: list[str] = Field(default_factory=list)


class ReproductionRecord(_Record):
    run_id: str
    commit: str
    package_drift: str = ""


class SimulatorRecord(_Record):
    """Who played the user, as the run's manifest records it: never a key."""

    source: Literal["served", "endpoint"]
    model: str
    hash: str = Field("", description="The served checkpoint's content hash (source 'served').")
    host: str = Field("", description="The external endpoint's host name (source 'endpoint').")


class PowerRecord(_Record):
    """What the run could detect, worked out before it ran (:mod:`harness.run.planning`)."""

    detectable_gain: float | None = Field(
        description="The smallest mean before -> after gain the paired test over tasks detects with `power` at "
        "`alpha` (None: none can be)."
    )
    base_rate: float = Field(description="The pass rate before training assumed.")
    base_rate_source: str = Field(description="Where the base rate came from (a recorded baseline or the default).")
    tasks: int = Field(description="Tasks evaluated.")
    samples: int = Field(description="Samples per task.")
    alpha: float
    power: float
    seeds: int = Field(description="Seeds a side assumed for the cross-run figure.")
    seed_sd: float = Field(description="Between-seed sd of a trained model's pass rate assumed.")
    seed_sd_source: str = Field(description="Where seed_sd came from (recorded runs or the default).")
    detectable_gain_seeds: float | None = Field(
        description="The smallest gain between trained models of two sides of `seeds` seeds each that the "
        "permutation test over seeds detects (None: none can be)."
    )
    assumptions: str = Field(description="The simulation's model, in words.")


class Manifest(_Record):
    """Everything needed to know what ran and to run it again."""

    format_version: Literal[3] = MANIFEST_VERSION
    run_id: str
    row: RunRow
    spec: SpecRecord
    args: ArgsRecord = ArgsRecord()
    dataset: DatasetRecord
    model: ModelRecord
    engine: EngineRecord
    backend: BackendRecord | None = Field(None, description="The backend's description (image digests).")
    user_simulator: SimulatorRecord | None = None
    serving: ServingRecord | None = Field(None, description="The policy server's starts and weight loads.")
    resources: ResourcesRecord | None = Field(None, description="Peak memory of the run's process tree.")
    train_metrics: list[dict[str, float]] = Field(default_factory=list, description="One record per training step.")
    phases: PhasesRecord = PhasesRecord()
    packages: dict[str, str] = Field(default_factory=dict)
    hardware: str = ""
    platform: dict[str, str] = Field(default_factory=dict)
    environment: dict[str, str] = Field(default_factory=dict, description="HARNESS_*, VLLM_*, OMP_* (no secrets).")
    resume: ResumeRecord = ResumeRecord()
    reproduces: ReproductionRecord | None = None
    power: PowerRecord | None = None

    @field_validator("row", mode="before")
    @classmethod
    def _row_current(cls, value: Any) -> Any:
        """A row recorded in an older table format is upgraded as the table's rows are."""
        return upgrade_row(value, "manifest row") if isinstance(value, dict) else value

    @field_validator("backend", "serving", "resources", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        """``{}`` is how a manifest says there was none (no server started, no memory sampled)."""
        return None if value == {} else value

    @field_serializer("backend", "serving", "resources")
    def _as_recorded(self, value: _Record | None) -> dict[str, Any]:
        """As recorded: the keys the writer gave (a local backend has no images), ``{}`` for none."""
        return {} if value is None else value.model_dump(mode="json", exclude_unset=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def for_row(cls, row: RunRow) -> Manifest:
        """The least a manifest says: what the row says (for runs recorded without one, e.g. in tests)."""
        return cls(
            run_id=row.run_id,
            row=row,
            spec=SpecRecord(
                path="", profile=row.profile, hash=row.spec_hash, resolved={}, version=row.benchmark_version
            ),
            dataset=DatasetRecord(name=row.benchmark, source="", sha256={row.eval_split: row.dataset_sha256}),
            model=ModelRecord(name=row.model, hash_before=row.model_hash_before, hash_after=row.model_hash_after),
            engine=EngineRecord(name=row.engine, steps=row.train_steps),
            hardware=row.hardware,
        )


# ------------------------------------------------------------------------------------------------------- upgrades

_TRUE_FALSE = {"True": True, "False": False}


def _typed(text: Any) -> Any:
    """A format-1 stringified option back to its type (``"True"``, ``"2"``, ``"None"``)."""
    if not isinstance(text, str):
        return text
    if text in _TRUE_FALSE:
        return _TRUE_FALSE[text]
    if text == "None":
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    return text


def _v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
    """Format 2 keeps the options' types; an empty ``user_simulator`` ({}) is no simulator."""
    args = raw.get("args") or {}
    passed = {k: _typed(v) for k, v in (args.get("as_passed") or {}).items()}
    out = {**raw, "format_version": 2, "args": {"as_passed": {k: v for k, v in passed.items() if v is not None}}}
    if not out.get("user_simulator"):
        out["user_simulator"] = None
    return out


def _v2_to_v3(raw: dict[str, Any]) -> dict[str, Any]:
    """Format 3 adds ``power``; a format-2 manifest has none (``None``)."""
    return {**raw, "format_version": 3}


STEPS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2, 2: _v2_to_v3}


VERSIONS = Versions("manifest", MANIFEST_VERSION, STEPS, key="format_version", error=ResultsError)
"""The manifest's formats: ``STEPS[v]`` upgrades a format-``v`` manifest to ``v + 1``."""


def parse_manifest(raw: dict[str, Any], where: str) -> Manifest:
    """A manifest read from JSON, upgraded to the current format; one line naming ``where`` when it is not one."""
    return VERSIONS.parse(raw, Manifest, where)
