"""Is checkpoint A better than B on these problems, decided as the samples arrive? An anytime-valid test.

**The estimand** is fixed: Δ = (1/P) Σ_i (p_A,i − p_B,i), the mean over *these* P problems of the
difference of the two checkpoints' chances of solving each (not over problems drawn like them:
:mod:`pr1_eval.stats.paired` answers that). Samples are paired per problem: the j-th sample of A on
problem i against the j-th of B, ``d_ij = x_A,ij − x_B,ij`` ∈ {−1, 0, 1}, with mean δ_i = p_A,i − p_B,i.

**The confidence sequence** is built on the empirical-Bernstein supermartingale of Howard,
Ramdas, McAuliffe and Sekhon (2021, "Time-uniform, nonparametric, nonasymptotic confidence
sequences", Ann. Statist.; the inequality of Fan, Grama and Liu 2015), in the predictable plug-in
style of Waudby-Smith and Ramdas (2023, "Estimating means of bounded random variables by betting",
JRSS-B). For ξ ≥ −1 and λ ∈ [0, 1), ``exp(λξ − ψ(λ)ξ²) ≤ 1 + λξ`` with ψ(λ) = −log(1 − λ) − λ.
For the side "Δ > m" (the other side uses −d) let d̂_ij be predicted from problem i's *earlier*
samples only, take a scale c_ij = 1 + d̂_ij (so ξ_ij = (d_ij − d̂_ij)/c_ij ≥ −1) and λ_ij = κ c_ij
for a constant κ (kept below 1 by capping d̂ at 0.95/κ − 1). Then E[exp(λξ − ψ(λ)ξ²)] ≤
exp(κ (δ_i − d̂_ij)), and since λ_ij ξ_ij = κ (d_ij − d̂_ij), every pair's factor

    exp( κ (d_ij − δ_i) − ψ(κ c_ij) (d_ij − d̂_ij)² / c_ij² )

has mean ≤ 1 whatever the δ_i are. The weight on every d_ij is the same κ, so where every problem
holds the same number n of pairs (the end of a round: the sweep gives every problem the same
samples per round) the product is ``exp(κ (Σ d − N Δ) − Q(κ))`` with N = nP: computable for a
candidate m = Δ. By Ville's inequality it ever exceeds 1/α with probability at most α, whatever
the number of looks and however the rounds were chosen from the past. Why this one:

* **the variance is within problems.** d̂ predicts each problem from its own past, so a problem both
  checkpoints always solve (or never do) adds nothing to Q, however far its δ_i is from Δ: the
  paired design's saving, kept without estimating anything between problems;
* **the scale is per pair, the weight is not**: one scale of 2 for every pair (the range of d − d̂)
  made differences with a small spread pay the whole range (the best λ sat at the grid's edge for
  every gap of 10 points or more); a betting martingale with a common mean needs every observation
  to have mean Δ, which per-problem pairs do not;
* **κ is mixed, not tuned**: the evidence is the mean over a fixed geometric grid of κ
  (:data:`KAPPAS`; a mean of supermartingales is one), so a gap of 40 points decides in one round
  and one of 5 points at k = 64, without knowing which in advance. The price is at most log(12) in
  the threshold, paid only when one κ alone would have been right.

Refused: a t-test or bootstrap looked at after every round (its error rate grows with the looks);
Bonferroni over planned looks (a sweep that runs longer voids it); the round means as observations
(their range is [−1, 1] however small their spread, so the bound is loose for tens of rounds).

Two one-sided sequences at α/2 each make the two-sided CS (:func:`confidence_sequence`); the sweep
uses the one-sided p-values (:func:`one_sided_p`) in its step-down over pairs. The verdicts read off it at a look: A
better (the CS above 0), B better (below 0), or within ±δ (inside (−δ, δ)). Tests:
``tests/pr1_eval/report/test_paired_sequential.py`` (coverage under optional stopping by simulation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: The κ grid of the mixture: 1.5 down to 0.02, geometric (12 values, equal weights).
KAPPAS = np.geomspace(1.5, 0.02, 12)
#: κ c stays at or below this (ψ grows without bound as κ c → 1).
_REACH = 0.95
_BISECTIONS = 30


def _psi(x: np.ndarray) -> np.ndarray:
    return np.asarray(-np.log1p(-x) - x)


@dataclass(frozen=True)
class Evidence:
    """A pair's running sums at its looks (leading axes any, then looks): ``total`` Σ d, ``pairs``
    N = n P, and ``penalty`` (… × looks × 2 sides × κ): Σ ψ(κ c)(e − ê)²/c² for the side's e = ±d."""

    total: np.ndarray
    pairs: np.ndarray
    penalty: np.ndarray

    def at(self, index: np.ndarray) -> Evidence:
        """The sums at look ``index`` (… : one index per leading position; −1 or below: no pairs)."""
        i = np.maximum(index, 0)[..., None]
        take = np.take_along_axis
        held = index >= 0
        penalty = take(self.penalty, i[..., None, None], axis=-3)[..., 0, :, :]
        return Evidence(np.where(held, take(self.total, i, axis=-1)[..., 0], 0.0),
                        np.where(held, take(self.pairs, i, axis=-1)[..., 0], 0.0),
                        np.where(held[..., None, None], penalty, 0.0))


def predictions(diffs: np.ndarray) -> np.ndarray:
    """d̂ for every pair (same shape as ``diffs``, last axis = sample order within a problem): the mean
    of the problem's earlier differences, shrunk towards 0 by one pseudo-pair (so the first is 0 and
    |d̂| < 1)."""
    earlier = np.cumsum(diffs, axis=-1) - diffs
    count = np.arange(diffs.shape[-1])
    return np.asarray(earlier / (count + 1))


def evidence(diffs: Any) -> Evidence:
    """The sums after every n = 1 … samples of ``diffs`` (… × problems × samples, values in [−1, 1])."""
    d = np.asarray(diffs, dtype=float)
    if d.ndim < 2:
        raise ValueError(f"need (problems × samples) differences, got shape {d.shape}")
    guess = predictions(d)
    sides = []
    for e, g in ((d, guess), (-d, -guess)):
        per_kappa = []
        for kappa in KAPPAS:
            centre = np.minimum(g, _REACH / kappa - 1)  # keeps κ c ≤ _REACH < 1
            scale = 1 + centre
            term = _psi(kappa * scale) / scale ** 2 * (e - centre) ** 2
            per_kappa.append(np.cumsum(term.sum(axis=-2), axis=-1))
        sides.append(np.stack(per_kappa, axis=-1))
    total = np.cumsum(d.sum(axis=-2), axis=-1)
    pairs = np.broadcast_to(d.shape[-2] * np.arange(1, d.shape[-1] + 1, dtype=float), total.shape)
    return Evidence(total, np.asarray(pairs), np.stack(sides, axis=-2))


def log_evidence(ev: Evidence, m: Any, side: int) -> np.ndarray:
    """log of the κ-mixture of M against "Δ = m" on one side (+1: evidence that Δ > m; −1: Δ < m)."""
    gain = side * (ev.total - ev.pairs * np.asarray(m, dtype=float))
    penalty = ev.penalty[..., 0 if side > 0 else 1, :]
    terms = KAPPAS * gain[..., None] - penalty
    top = terms.max(axis=-1)
    return np.asarray(top + np.log(np.exp(terms - top[..., None]).mean(axis=-1)))


def one_sided_p(ev: Evidence, m: float, side: int) -> np.ndarray:
    """The anytime-valid p-value of "Δ ≤ m" (side +1) or "Δ ≥ m" (side −1) at each look: 1/M, at most 1.
    Its running minimum over looks is still a valid p-value (Ville), which is what makes the sweep's
    step-down (:func:`pr1_eval.stats.ranking_sequential.step_down`) valid at every look."""
    return np.asarray(np.exp(-np.maximum(log_evidence(ev, m, side), 0.0)))


def threshold(alpha: Any) -> np.ndarray:
    """The log-evidence one side needs: log(2/α) (two sides at α/2 each); α may be an array (one per pair)."""
    a = np.asarray(alpha, dtype=float)
    if not ((a > 0) & (a < 1)).all():
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return np.asarray(np.log(2 / a))


@dataclass(frozen=True)
class Verdicts:
    """What a look certifies about Δ = mean p_A − mean p_B (booleans, any shape):
    ``above``: Δ > 0; ``below``: Δ < 0; ``not_below``: Δ > −δ; ``not_above``: Δ < δ."""

    above: np.ndarray
    below: np.ndarray
    not_below: np.ndarray
    not_above: np.ndarray

    @property
    def within(self) -> np.ndarray:
        """Certified within ±δ."""
        return self.not_below & self.not_above

    @property
    def decided(self) -> np.ndarray:
        """A sign, or within ±δ."""
        return self.above | self.below | self.within


def verdicts(ev: Evidence, alpha: Any, delta: float) -> Verdicts:
    """The four statements a look certifies at level ``alpha`` and resolution ``delta``."""
    level = threshold(alpha)
    return Verdicts(log_evidence(ev, 0.0, +1) >= level, log_evidence(ev, 0.0, -1) >= level,
                    log_evidence(ev, -delta, +1) >= level, log_evidence(ev, delta, -1) >= level)


def confidence_sequence(ev: Evidence, alpha: Any) -> tuple[np.ndarray, np.ndarray]:
    """The CS's bounds for Δ at each look (vectorised bisection; [−1, 1] with no pairs)."""
    level = threshold(alpha)
    return _bisect(ev, level, +1), _bisect(ev, level, -1)


def _bisect(ev: Evidence, level: np.ndarray, side: int) -> np.ndarray:
    """The bound on one side: for side +1, inf{m : evidence that Δ > m stays below the level}."""
    shape = np.shape(ev.total)
    excluded, kept = np.full(shape, -1.0 * side), np.full(shape, 1.0 * side)  # the far edge is always kept
    for _ in range(_BISECTIONS):
        middle = (excluded + kept) / 2
        out = log_evidence(ev, middle, side) >= level
        excluded, kept = np.where(out, middle, excluded), np.where(out, kept, middle)
    return np.where(ev.pairs > 0, kept, -1.0 * side)


def half_width(ev: Evidence, alpha: Any) -> np.ndarray:
    """Half the CS's width: the gap that this many pairs resolve (printed as "MDE reached")."""
    low, high = confidence_sequence(ev, alpha)
    return np.asarray((high - low) / 2)
