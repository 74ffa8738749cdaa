"""Adaptive-Consistency's stopping rule (Aggarwal et al. 2023, "Let's Sample Step by Step"), as
its authors wrote it, so the replay of ``asc@n`` (:class:`pr1_eval.replay.controllers.AdaptiveConsistency`)
reproduces their figures.

The rule: after each branch, the posterior probability, under a uniform prior on the two leading
answers' shares, that the leader is ahead; stop once it passes the threshold. It carries no error
guarantee over the many looks it is checked at (the certified rule, :mod:`pr1_eval.stats.mode`,
does). Apart from :mod:`pr1_eval.stats.mode` because it needs neither numpy nor scipy until it runs,
so the replay's controllers load neither when imported.
"""

from __future__ import annotations

from functools import cache


@cache
def asc_confidence(v1: int, v2: int) -> float:
    """P(p1 > p2) as Adaptive-Consistency computes it: 1 − BetaCDF(0.5; v1 + 1, v2 + 1)."""
    from scipy.stats import beta

    return float(1 - beta.cdf(0.5, v1 + 1, v2 + 1))
