"""The training reward, one definition for every engine: the rollout's task reward plus the profile's shaping.

``training.config.shaping`` maps names to weights, the same form for every engine. ``length_penalty`` is the
harness's own term (the share of the response budget a rollout used, subtracted); every other name is one of the
benchmark's ``shaping_terms``, a dense signal in [0, 1] that :meth:`harness.benchmark.protocol.Benchmark.shaping`
computes from the scored episode (for example math's ``format_reward``: the answer has the ``###`` format). Shaping
exists for models too small to earn the task reward at first; pass rates never use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.benchmark.protocol import Benchmark, Episode, Task
from harness.errors import SpecError

LENGTH_PENALTY = "length_penalty"


@dataclass(frozen=True)
class Shaping:
    """Weights of the benchmark's shaping terms, and the length penalty."""

    weights: Mapping[str, float] = field(default_factory=dict)
    length_penalty: float = 0.0

    @classmethod
    def from_config(cls, raw: Mapping[str, float] | None) -> Shaping:
        weights = {str(k): float(v) for k, v in (raw or {}).items() if float(v) != 0.0}
        return cls(
            weights={k: v for k, v in weights.items() if k != LENGTH_PENALTY},
            length_penalty=weights.get(LENGTH_PENALTY, 0.0),
        )

    def check(self, bench: Benchmark) -> None:
        """One line naming a weighted term the benchmark does not provide (before anything starts)."""
        known = bench.shaping_terms
        unknown = sorted(set(self.weights) - set(known))
        if unknown:
            offered = ", ".join((*known, LENGTH_PENALTY))
            raise SpecError(
                f"training.config.shaping: {', '.join(unknown)} is not a shaping term of benchmark "
                f"{bench.name!r} (it offers: {offered})"
            )


def training_reward(
    bench: Benchmark, episode: Episode, task: Task, shaping: Shaping, length_used: float = 0.0
) -> float:
    """``episode.reward`` plus each weighted shaping term, minus ``length_penalty`` times ``length_used`` (the
    share of the response budget the rollout used, in [0, 1])."""
    reward = float(episode.reward)
    if shaping.weights:
        terms = bench.shaping(episode, task)
        for name, weight in shaping.weights.items():
            reward += weight * float(terms.get(name, 0.0))
    if shaping.length_penalty:
        reward -= shaping.length_penalty * min(1.0, max(0.0, length_used))
    return reward
