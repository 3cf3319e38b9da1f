"""verl's ``custom_reward_function`` for the math benchmark, for ``verl_speed.py``: the benchmark's own reward
(``benchmarks/math/reward.py``: the answer after ``###`` against the ground truth) on the agent's final turn.

verl's tool agent loop hands the reward function the whole decoded response: the model's turns and the tool results
between them. The harness scores the agent's final text, so this scores the text after the last tool result.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

_path = Path(__file__).resolve().parents[2] / "benchmarks" / "math" / "reward.py"
_spec = importlib.util.spec_from_file_location("_math_reward", _path)
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)


def final_turn(solution_str: str) -> str:
    return solution_str.rsplit("</tool_response>", 1)[-1]


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None, **_: Any) -> float:
    return float(_module.reward(final_turn(solution_str), str(ground_truth)))
