"""Which checkpoint is best, or how they rank at resolution δ, decided from the pairwise confidence sequences.

The pairwise statements come from :mod:`pr1_eval.stats.paired_sequential`; this module turns them
into the sweep's verdicts and says which checkpoints still need samples. Everything is a pure
function over arrays whose last two axes are checkpoints × checkpoints (any leading axes: the bench
runs a thousand resamples at once, the sweep one).

**The guarantee.** Each pair (a, b) carries three hypotheses about Δ_ab = μ_a − μ_b: its sign
(null Δ_ab = 0, and a declared sign is wrong only if the other side's evidence was large), "a is
not worse by δ" (null Δ_ab ≤ −δ) and "b is not worse by δ" (null Δ_ab ≥ δ); "within ±δ" is both of
the last two. Each hypothesis has an anytime-valid p-value (:func:`pr1_eval.stats.paired_sequential.one_sided_p`,
its running minimum over looks), and a *weighted Holm step-down* over all of them (:func:`step_down`)
rejects at level α. A p-value's running minimum is never below its minimum over all time, which is a
valid p-value, and Holm's step-down controls the family-wise error for any valid p-values with any
dependence; so the step-down, applied at every look, makes a false rejection at *any* look with
probability ≤ α. With probability ≥ 1 − α every declared sign, every "within ±δ" and the declared
best (below) are right, however the rounds, the stopping and the allocation were chosen from the
past. Why a step-down rather than α split over the pairs: a sweep has pairs 60 points apart that
decide in the first round; once they are rejected their weight goes to the close pairs, as Holm's
does for the fixed-k test it is compared with (``bench/bench_ranking.py``).

**α for checkpoints that arrive later.** A live sweep may gain checkpoints while it runs. The
step-down's weights (:func:`pair_weights`): pairs among the first ``planned`` checkpoints share
1 − reserve of the total weight equally; the j-th checkpoint beyond them (j = 1, 2, …) brings
reserve/2^j, split equally over its pairs with the checkpoints before it. The weight not yet given
to any pair stays in the step-down's denominator (it counts as hypotheses not rejected), so pairs
that arrive later keep the guarantee, and no pair's weight changes once it is set.

**Best.** c is *eliminated* once some a is certified better than it. b is declared best once it is
not eliminated and certified not worse by δ than every other checkpoint not eliminated
(Δ_bc > −δ). On the good event that is enough: an eliminated c is below some a, and following
"below" ends at a checkpoint not eliminated, so μ_b > μ_c − δ for every c. Samples go to the
checkpoints not eliminated.

**Ranking at resolution δ.** Every pair is decided once its sign is certified or it is certified
within ±δ. Samples go to checkpoints with a pair that is undecided and *still decidable at this
budget*: the interval's half-width h, projected to ``k_max`` pairs by h·√(n/k_max), is below the gap the
pair needs (|Δ̂| for a sign, δ − |Δ̂| for "within"), with slack (:data:`HOPE`). A pair that cannot
be decided by ``k_max`` is not chased: it is reported "undecided at this budget" with the gap it
resolved. This allocation is predictable (fixed from the past before each round), so it costs the
guarantee nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pr1_eval.stats.paired_sequential import Evidence, Verdicts, one_sided_p

#: Questions a sweep can ask.
QUESTIONS = ("best", "ranking")
#: A pair is chased while its projected half-width at k_max is below HOPE × the gap it needs. 2, measured on the
#: budget testbed (``bench/bench_ranking.py``): with the α-spending test, 1.0-1.5 gave up on pairs fixed k
#: decides (-0.2 to -4 of 45 pairs at k_max = 8-16) for 2-20 % fewer samples; 2 and above decide what fixed
#: k = k_max decides and stop only what is already decided or truly out of reach.
HOPE = 2.0


def pair_weights(count: int, planned: int | None = None, reserve: float = 0.1) -> tuple[np.ndarray, float]:
    """(weight per pair over the pairs a < b in ``np.triu_indices(count, 1)`` order, weight kept for
    pairs yet to arrive), for checkpoints in arrival order (module docstring). Weights sum to 1 with
    the kept one."""
    planned = count if planned is None else min(planned, count)
    if not 0 <= reserve < 1:
        raise ValueError(f"reserve must be in [0, 1), got {reserve}")
    if count > planned and reserve == 0:
        raise ValueError("checkpoints beyond the planned ones need a reserve")
    a, b = np.triu_indices(count, 1)
    first = max(planned * (planned - 1) // 2, 1)
    late = b - planned + 1  # 1 for the first checkpoint past the planned ones
    weights = np.where(b < planned, (1 - reserve) / first, reserve / 2.0 ** np.maximum(late, 1) / np.maximum(b, 1))
    return weights, float(1 - weights.sum())


def step_down(p: np.ndarray, weights: np.ndarray, kept: float, alpha: float) -> np.ndarray:
    """Weighted Holm (Holm 1979): which hypotheses (last axis of ``p``) are rejected at level ``alpha``.

    In order of p/w, hypothesis j is rejected while p_j ≤ α w_j / W, W the weight of everything not
    yet rejected (``kept`` included: hypotheses still to arrive)."""
    p = np.asarray(p, dtype=float)
    w = np.broadcast_to(np.asarray(weights, dtype=float), p.shape)
    order = np.argsort(p / np.maximum(w, 1e-300), axis=-1, kind="stable")
    ps_, ws = np.take_along_axis(p, order, axis=-1), np.take_along_axis(w, order, axis=-1)
    remaining = w.sum(axis=-1, keepdims=True) + kept - (np.cumsum(ws, axis=-1) - ws)
    passes = ps_ <= alpha * ws / remaining
    run = np.cumprod(passes, axis=-1).astype(bool)
    out = np.zeros(p.shape, dtype=bool)
    np.put_along_axis(out, order, run, axis=-1)
    return out


@dataclass(frozen=True)
class Running:
    """Running minima of each pair's four one-sided anytime p-values (… × pairs): Δ ≤ 0, Δ ≥ 0, Δ ≤ −δ, Δ ≥ δ."""

    up: np.ndarray
    down: np.ndarray
    not_below: np.ndarray
    not_above: np.ndarray

    @classmethod
    def start(cls, shape: tuple[int, ...]) -> Running:
        return cls(*(np.ones(shape) for _ in range(4)))

    def update(self, ev: Evidence, delta: float, seen: np.ndarray | None = None) -> Running:
        """Fold in a confidence-sequence look (``seen``: pairs that hold samples at this look; the others keep
        their values)."""
        return self.fold([one_sided_p(ev, 0.0, +1), one_sided_p(ev, 0.0, -1), one_sided_p(ev, -delta, +1),
                          one_sided_p(ev, delta, -1)], seen)

    def fold(self, new: list[np.ndarray], seen: np.ndarray | None = None) -> Running:
        """Fold in a look's four p-values, from either rule (:mod:`pr1_eval.stats.group_sequential` gives them too)."""
        if seen is not None:
            new = [np.where(seen, x, 1.0) for x in new]
        return Running(*(np.minimum(old, x) for old, x in zip((self.up, self.down, self.not_below, self.not_above),
                                                              new, strict=True)))


def certify(running: Running, weights: np.ndarray, kept: float, alpha: float, count: int,
            question: str = "best") -> Certified:
    """The step-down over every pair's hypotheses, as C × C statements. For the best: three per pair (the
    sign, and "not worse by δ" each way, each needed alone), weight split in three. For the ranking: two
    per pair, the sign and "within ±δ" as one intersection-union hypothesis (p = the larger of its two
    one-sided p-values, Berger 1982), weight split in two, as the fixed-k test does with TOST."""
    sign_p = np.minimum(2 * np.minimum(running.up, running.down), 1.0)
    n = weights.shape[-1]
    up = running.up <= running.down
    if question == "ranking":
        p = np.concatenate([sign_p, np.maximum(running.not_below, running.not_above)], axis=-1)
        rejected = step_down(p, np.concatenate([weights, weights]) / 2, kept, alpha)
        sign, within = rejected[..., :n], rejected[..., n:]
        return Certified(pair_matrix(sign & up, sign & ~up, count), pair_matrix(within, within, count))
    p = np.concatenate([sign_p, running.not_below, running.not_above], axis=-1)
    rejected = step_down(p, np.concatenate([weights, weights, weights]) / 3, kept, alpha)
    sign, nb, na = rejected[..., :n], rejected[..., n:2 * n], rejected[..., 2 * n:]
    return Certified(pair_matrix(sign & up, sign & ~up, count), pair_matrix(nb, na, count))


@dataclass(frozen=True)
class Certified:
    """Statements certified so far (… × C × C booleans): ``beats[a, b]`` μ_a > μ_b; ``close[a, b]`` μ_a > μ_b − δ."""

    beats: np.ndarray
    close: np.ndarray

    @classmethod
    def none(cls, shape: tuple[int, ...]) -> Certified:
        return cls(np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool))

    def add(self, other: Certified) -> Certified:
        """Everything certified by either (a CS holds at every look at once, so statements accumulate)."""
        return Certified(self.beats | other.beats, self.close | other.close)

    @classmethod
    def from_pairs(cls, v: Verdicts, count: int) -> Certified:
        """A look's verdicts on the pairs a < b (last axis in ``np.triu_indices(count, 1)`` order) as matrices."""
        return cls(pair_matrix(v.above, v.below, count), pair_matrix(v.not_below, v.not_above, count))

    @property
    def decided(self) -> np.ndarray:
        """Per pair: a sign, or within ±δ (symmetric)."""
        within = self.close & np.swapaxes(self.close, -1, -2)
        return self.beats | np.swapaxes(self.beats, -1, -2) | within


def round_bounds(first: int, k_max: int, growth: float = 2.0) -> list[int]:
    """Samples per problem after each round: ``first``, then × ``growth`` (rounded up, at least one more),
    and ``k_max``. Why geometric: a sweep reloads a checkpoint's model for each round it samples, so
    rounds must be few (growth 2 from 4: 5 rounds to 64), while a finer growth stops closer to the
    point where a comparison decides (growth 1.5 from 4: 4, 6, 9, 14, 21, 32, 48, 64)."""
    if first < 1 or k_max < 1 or growth <= 1:
        raise ValueError(f"need a first round ≥ 1, k_max ≥ 1 and growth > 1, got {first}, {k_max}, {growth}")
    out, n = [], first
    while n < k_max:
        out.append(n)
        n = max(n + 1, math.ceil(n * growth))
    return [*out, k_max]


def eliminated(cert: Certified) -> np.ndarray:
    """(… × C) checkpoints certified below some other."""
    return np.asarray(cert.beats.any(axis=-2))


def declared_best(cert: Certified, means: np.ndarray) -> np.ndarray:
    """(…) index of the declared best, −1 while undecided; among several qualified, the highest estimate."""
    alive = ~eliminated(cert)
    count = cert.close.shape[-1]
    eye = np.eye(count, dtype=bool)
    # b qualifies: alive, and close[b, c] for every alive c ≠ b
    ok = alive & ((cert.close | eye | ~alive[..., None, :]).all(axis=-1))
    score = np.where(ok, means, -np.inf)
    return np.where(ok.any(axis=-1), score.argmax(axis=-1), -1)


def chased(estimate: np.ndarray, half: np.ndarray, held: np.ndarray, k_max: int, delta: float) -> np.ndarray:
    """Per pair: still decidable at ``k_max`` samples per problem (module docstring); pairs with no
    samples yet are always chased."""
    projected = half * np.sqrt(np.maximum(held, 1) / k_max)
    need = np.maximum(np.abs(estimate), delta - np.abs(estimate))
    return np.asarray((held == 0) | (projected < HOPE * need))


def open_checkpoints(question: str, cert: Certified, wanted: np.ndarray | None = None) -> np.ndarray:
    """(… × C) checkpoints that get the next round's samples."""
    if question == "best":
        return ~eliminated(cert)
    if question != "ranking":
        raise ValueError(f"question must be one of {QUESTIONS}, got {question!r}")
    count = cert.beats.shape[-1]
    pending = ~cert.decided & ~np.eye(count, dtype=bool)
    if wanted is not None:
        pending &= wanted
    return np.asarray(pending.any(axis=-1))


def finished(question: str, cert: Certified, means: np.ndarray, open_now: np.ndarray) -> np.ndarray:
    """(…) the question is answered (best declared; or no checkpoint needs samples)."""
    if question == "best":
        return np.asarray(declared_best(cert, means) >= 0)
    return np.asarray(~open_now.any(axis=-1))


def pair_matrix(forward: Any, backward: Any, count: int) -> np.ndarray:
    """… × C × C from values over pairs a < b: ``forward`` at [a, b], ``backward`` at [b, a]."""
    forward, backward = np.asarray(forward), np.asarray(backward)
    out = np.zeros(forward.shape[:-1] + (count, count), dtype=forward.dtype)
    a, b = np.triu_indices(count, 1)
    out[..., a, b] = forward
    out[..., b, a] = backward
    return out


def as_matrix(pairs: Any, count: int, antisymmetric: bool = False) -> np.ndarray:
    """Values over pairs a < b (last axis, in ``np.triu_indices(count, 1)`` order) as … × C × C."""
    pairs = np.asarray(pairs)
    out = np.zeros(pairs.shape[:-1] + (count, count), dtype=pairs.dtype)
    a, b = np.triu_indices(count, 1)
    out[..., a, b] = pairs
    out[..., b, a] = -pairs if antisymmetric else pairs
    return out


def guarantee_line(alpha: float, delta: float, question: str, test: str = "obrien-fleming", k_max: int = 0) -> str:
    """The one line printed under the table."""
    best = f", or a declared best more than {100 * delta:g} points below the true best" if question == "best" else ""
    how = ("anytime-valid confidence sequences" if test == "cs" else
           f"paired z-tests with {'Pocock' if test == 'pocock' else 'O’Brien–Fleming'} α spending over the looks up to "
           f"k_max = {k_max}")
    return (f"Guarantee: the chance of any wrong declared sign, any wrong 'within ±{100 * delta:g} points'{best}, "
            f"across all comparisons of this sweep, is at most {alpha:g} ({how} on the mean over these problems of "
            "p_A − p_B; undecided pairs make no claim).")
