"""Tiny real GGUF models and "chunk" wheels made in a test, for the model-source tests.

The GGUF is a one-layer Qwen2 (attention biases, untied output layer, a byte-level BPE vocabulary of 260 tokens)
written with the ``gguf`` package's own writer, so transformers reads it exactly as it reads a published file.
The chunk wheels have the layout of the packages that carry large GGUF files on PyPI: each holds one
``<module>/data/partNN.bin``, with the dist-info pip needs to find and download it from a folder.
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import numpy as np

QWEN_TOOL_EXAMPLE = '{{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}}'
"""The doubled-brace tool-call example of the Qwen2.5-Coder GGUF's template (a string literal inside Jinja)."""
TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nTools:{% for t in tools %}\n{{ t | tojson }}{% endfor %}\n"
    'Call a tool like this:\n<tool_call>\n{{- "\\n' + QWEN_TOOL_EXAMPLE + '\\n" }}</tool_call><|im_end|>\n'
    "{%- endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{% for c in m.tool_calls or [] %}<tool_call>\n"
    '{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}\n</tool_call>'
    "{% endfor %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _byte_level_alphabet() -> list[str]:
    """GPT-2's byte-to-character table: one vocabulary entry per byte."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    extra = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + extra)
            extra += 1
    return [chr(c) for c in cs]


def write_tiny_qwen2(path: Path, template: str = TEMPLATE, seed: int = 0) -> Path:
    import gguf

    rng = np.random.default_rng(seed)
    tokens = [*_byte_level_alphabet(), "Ġt", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    vocab, hidden, ffn, heads, kv_heads = len(tokens), 16, 32, 2, 1
    head_dim = hidden // heads
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_context_length(128)
    w.add_embedding_length(hidden)
    w.add_block_count(1)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types([1] * (vocab - 3) + [3, 3, 3])
    w.add_token_merges(["Ġ t"])
    w.add_bos_token_id(vocab - 3)
    w.add_eos_token_id(vocab - 1)
    w.add_pad_token_id(vocab - 3)
    w.add_chat_template(template)

    def tensor(name: str, *shape: int) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * 0.1).astype(np.float32))

    tensor("token_embd.weight", vocab, hidden)
    tensor("blk.0.attn_norm.weight", hidden)
    tensor("blk.0.ffn_norm.weight", hidden)
    tensor("blk.0.attn_q.weight", hidden, hidden)
    tensor("blk.0.attn_q.bias", hidden)
    tensor("blk.0.attn_k.weight", kv_heads * head_dim, hidden)
    tensor("blk.0.attn_k.bias", kv_heads * head_dim)
    tensor("blk.0.attn_v.weight", kv_heads * head_dim, hidden)
    tensor("blk.0.attn_v.bias", kv_heads * head_dim)
    tensor("blk.0.attn_output.weight", hidden, hidden)
    tensor("blk.0.ffn_gate.weight", ffn, hidden)
    tensor("blk.0.ffn_up.weight", ffn, hidden)
    tensor("blk.0.ffn_down.weight", hidden, ffn)
    tensor("output_norm.weight", hidden)
    tensor("output.weight", vocab, hidden)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def chunk_wheels(gguf_file: Path, folder: Path, name: str, parts: int, version: str = "0.1.0") -> list[str]:
    """Split ``gguf_file`` into ``parts`` chunk wheels in ``folder``; returns their pins in part order."""
    data = gguf_file.read_bytes()
    size = -(-len(data) // parts)
    folder.mkdir(parents=True, exist_ok=True)
    pins = []
    for i in range(parts):
        dist = f"{name}-part{i + 1}"
        module = dist.replace("-", "_")
        info = f"{module}-{version}.dist-info"
        files = {
            f"{module}/__init__.py": b"",
            f"{module}/data/part{i + 1:02d}.bin": data[i * size : (i + 1) * size],
            f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n".encode(),
            f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        }
        record = "".join(f"{p},sha256={hashlib.sha256(b).hexdigest()},{len(b)}\n" for p, b in files.items())
        files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
        with zipfile.ZipFile(folder / f"{module}-{version}-py3-none-any.whl", "w") as z:
            for p, b in files.items():
                z.writestr(p, b)
        pins.append(f"{dist}=={version}")
    return pins
