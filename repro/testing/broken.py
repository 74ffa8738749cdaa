"""Trainers broken on purpose, for measuring that the nano job's learning checks catch them.

Each breakage is one thing a real bug could do, applied in every VERL process of a job (this module
rides on ``VERL_USE_EXTERNAL_MODULES`` like the CPU platform, and :data:`BREAK_ENV` names the
breakage). ``bench/bench_nano_draws.py --variant NAME`` runs the CI slice with it; the checks must
fail. Never imported by a real job.

- ``lr0``: no breakage here; the bench sets the actor's learning rate to 0 (the policy never moves:
  the null the learning checks are calibrated on).
- ``sign``: the reward's sign flipped where the trainer reads it (the estimator :data:`NEGATED_GRPO`:
  GRPO's advantages of the negated rewards). The rollouts still store the task's reward, so the
  learning check judges what the reward pays for, not the flipped number the trainer climbs (a
  flipped *stored* reward rises as the policy gets worse, and the check would read that as learning).
- ``noadv``: every advantage zeroed (the estimator :data:`ZERO_ADVANTAGE`, registered with VERL).
- ``nospans``: the structured actor is handed no path spans and falls back to a parse of the tokens.
"""

from __future__ import annotations

import os
from typing import Any

BREAK_ENV = "PR1_NANO_BREAK"
ZERO_ADVANTAGE = "pr1_zero_advantage"
NEGATED_GRPO = "pr1_negated_grpo"
VARIANTS = ("ok", "lr0", "sign", "noadv", "nospans")


def _register_negated_grpo() -> None:
    import torch
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, compute_grpo_outcome_advantage, register_adv_est

    if NEGATED_GRPO in ADV_ESTIMATOR_REGISTRY:
        return

    @register_adv_est(NEGATED_GRPO)  # type: ignore[untyped-decorator]
    def negated_grpo(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any,
                     config: Any = None, **_: Any) -> tuple[torch.Tensor, torch.Tensor]:
        by_std = True if config is None else bool(config.get("norm_adv_by_std_in_grpo", True))
        return compute_grpo_outcome_advantage(-token_level_rewards, response_mask, index,  # type: ignore[no-any-return]
                                              norm_adv_by_std_in_grpo=by_std, config=config)


def _register_zero_advantage() -> None:
    import torch
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

    if ZERO_ADVANTAGE in ADV_ESTIMATOR_REGISTRY:
        return

    @register_adv_est(ZERO_ADVANTAGE)  # type: ignore[untyped-decorator]
    def zero_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor,
                       **_: Any) -> tuple[torch.Tensor, torch.Tensor]:
        zeros = torch.zeros_like(token_level_rewards) * response_mask
        return zeros, zeros


def _drop_spans() -> None:
    import repro.structured_actor as actor

    actor.batch_spans = lambda micro_batch, rows: None  # type: ignore[assignment]


def overrides(variant: str, structured: bool) -> list[str]:
    """The Hydra overrides of ``variant`` for a GRPO stage (empty for ``ok``, ``nospans`` on a Seen stage)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown breakage {variant!r}; choose one of {', '.join(VARIANTS)}")
    if variant == "lr0":
        return ["actor_rollout_ref.actor.optim.lr=0"]
    if variant == "sign":
        return [f"algorithm.adv_estimator={NEGATED_GRPO}"]
    if variant == "noadv":
        return [f"algorithm.adv_estimator={ZERO_ADVANTAGE}"]
    return []


def apply() -> None:
    """Install the breakage :data:`BREAK_ENV` names in this process (called on import)."""
    variant = os.environ.get(BREAK_ENV, "")
    if variant == "noadv":
        _register_zero_advantage()
    elif variant == "sign":
        _register_negated_grpo()
    elif variant == "nospans":
        _drop_spans()


apply()
