"""One policy-gradient step on traced (prompt ids, completion ids, advantage) triplets; a child process of the
``trace-grpo`` engine, which names them in the job (a :class:`~harness.engines.jobs.Triplet` a line).

loss = - mean over triplets of (advantage x mean log-probability of the completion tokens given the prompt).
With one on-policy step per batch the PPO/GRPO ratio is 1, so this is the clipped objective's gradient. Only the
completion positions go through the output layer, which keeps long multi-turn prompts affordable on CPU.
Prints one progress record (:mod:`harness.engines.progress`) with the update's loss, gradient norm and tokens.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from harness.engines.jobs import UpdateJob, read_triplets
from harness.engines.progress import ProgressRecord, progress_line

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")


def _copy_side_files(src: Path, dest: Path) -> None:
    """Tokenizer, chat template and generation config travel with the weights."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and not f.name.endswith(WEIGHT_SUFFIXES) and f.name != "config.json":
            shutil.copy2(f, dest / f.name)


def step(job: UpdateJob) -> ProgressRecord:
    import torch
    from transformers import AutoModelForCausalLM

    if job.torch_threads:
        torch.set_num_threads(job.torch_threads)
    torch.manual_seed(job.seed)
    src, out = job.checkpoint, job.output_dir
    triplets = read_triplets(job.triplets)
    if not triplets:
        raise SystemExit("no triplets")
    started = time.monotonic()
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=job.learning_rate, weight_decay=0.0)
    body, head = model.get_decoder(), model.get_output_embeddings()
    total_loss, tokens = 0.0, 0
    for t in triplets:
        prompt, completion = t.prompt_ids, t.completion_ids
        ids = torch.tensor([prompt + completion])
        hidden = body(input_ids=ids).last_hidden_state[0, len(prompt) - 1 : -1]
        logp = torch.log_softmax(head(hidden).float(), dim=-1)
        token_logp = logp.gather(1, torch.tensor(completion)[:, None]).squeeze(1)
        loss = -t.advantage * token_logp.mean() / len(triplets)
        loss.backward()
        total_loss += float(loss)
        tokens += len(prompt) + len(completion)
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), job.max_grad_norm))
    optimizer.step()
    _copy_side_files(src, out)
    model.save_pretrained(out, safe_serialization=True)
    wall = time.monotonic() - started
    return ProgressRecord(
        loss=total_loss,
        grad_norm=grad_norm,
        tokens=tokens,
        tokens_per_s=tokens / wall if wall > 0 else 0.0,
        update_s=round(wall, 2),
    )


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m harness.engines.trace.worker JOB.json", file=sys.stderr)
        return 2
    result = step(UpdateJob.read(Path(argv[0])))
    print(progress_line(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
