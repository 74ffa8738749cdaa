"""Trainers broken on purpose, for measuring that the nano job's learning checks catch them.

Each breakage is one thing a real bug could do, applied in every VERL process of a job (this module
rides on ``VERL_USE_EXTERNAL_MODULES`` like the CPU platform, and :data:`BREAK_ENV` names the
breakage). ``bench/bench_nano_draws.py --variant NAME`` runs the CI slice with it; the checks must
fail. Never imported by a real job.

- ``lr0``: no breakage here; the bench sets the actor's learning rate to 0 (the policy never moves:
  the null the learning checks are calibrated on).
- ``sign``: the reward's sign flipped (:func:`negated_compute_score`, set as the custom reward).
- ``noadv``: every advantage zeroed (the estimator :data:`ZERO_ADVANTAGE`, registered with VERL).
- ``nospans``: the structured actor is handed no path spans and falls back to a parse of the tokens.
"""

from __future__ import annotations

import os
from typing import Any

BREAK_ENV = "PR1_NANO_BREAK"
ZERO_ADVANTAGE = "pr1_zero_advantage"
VARIANTS = ("ok", "lr0", "sign", "noadv", "nospans")


def negated_compute_score(*args: Any, **kwargs: Any) -> dict[str, float]:
    """:func:`repro.rewards.compute_score` with its score negated: the policy is pushed away from what
    the reward pays for."""
    from repro.rewards import compute_score

    out = dict(compute_score(*args, **kwargs))
    out["score"] = -out["score"]
    return out


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
        return ["reward.custom_reward_function.path=pkg://repro.testing.broken",
                "reward.custom_reward_function.name=negated_compute_score"]
    if variant == "noadv":
        return [f"algorithm.adv_estimator={ZERO_ADVANTAGE}"]
    return []


def apply() -> None:
    """Install the breakage :data:`BREAK_ENV` names in this process (called on import)."""
    variant = os.environ.get(BREAK_ENV, "")
    if variant == "noadv":
        _register_zero_advantage()
    elif variant == "nospans":
        _drop_spans()


apply()
