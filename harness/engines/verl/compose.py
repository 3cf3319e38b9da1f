"""VERL's own configuration of a run: its ``ppo_trainer`` defaults composed with the run's keys
(:func:`harness.engines.verl.engine.verl_run_config`), and VERL's own check of it.

The check is what VERL's ``main_ppo`` runs before it starts Ray (``validate_config``: batch sizes against GPUs,
micro-batch keys, the actor's settings), plus the one thing the harness cannot set up: a critic. It needs VERL
installed (the GPU image, a GPU machine), not a GPU, so a profile VERL would refuse fails at ``harness validate``
rather than minutes into a run on a GPU.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path
from typing import Any

from harness.errors import EngineError


def compose(run_config: dict[str, Any]) -> Any:
    """VERL's ``ppo_trainer`` config (its defaults) with ``run_config`` merged over it: what ``main_ppo`` runs."""
    import hydra
    from omegaconf import OmegaConf
    from verl.trainer import main_ppo

    config_dir = str(Path(main_ppo.__file__).parent / "config")
    with hydra.initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = hydra.compose(config_name="ppo_trainer")
    OmegaConf.set_struct(cfg, False)
    return OmegaConf.merge(cfg, OmegaConf.create(run_config))


def check(cfg: Any) -> None:
    """VERL's own check of a composed config, as ``main_ppo`` runs it; :class:`EngineError` with VERL's message.

    A config that would train a critic (``algorithm.adv_estimator: gae``, or ``critic.enable``) is refused too:
    the harness gives the critic no model, so VERL would fail on its placeholder path."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # VERL warns that a non-GAE estimator disables the critic: that is the point
        critic = need_critic(cfg)
    if critic:
        raise EngineError(
            f"VERL would train a critic (algorithm.adv_estimator={cfg.algorithm.adv_estimator}, "
            f"critic.enable={cfg.critic.enable}), which the harness does not set up: use a critic-free estimator "
            "(grpo, rloo, reinforce_plus_plus, grpo_passk)"
        )
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its notices and "all checks passed" line
            validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=False)
    except (AssertionError, ValueError, TypeError) as err:
        raise EngineError(f"VERL's own config check: {' '.join(str(err).split())}") from None
