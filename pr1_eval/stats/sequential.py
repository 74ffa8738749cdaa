"""When may an evaluation stop sampling a problem? The anytime-valid rule of adaptive runs.

An adaptive run (``pr1-eval run --adaptive``) draws a problem's samples in rounds of ``round_size``
and stops the problem once it is *settled*: an anytime-valid confidence sequence (CS) for its
chance of being solved, p, lies wholly below ``margin`` (the model is settled as failing it) or
wholly above ``1 − margin`` (settled as solving it). Problems that are not settled get all
``max_k`` samples, as a fixed-k run would.

Why this decision. A checkpoint's Mean@k is a mean over problems of c/n; its uncertainty is mostly
*which problems* the benchmark holds (30 AIME problems), and the within-problem part comes from
problems with p in the middle: a problem the model always solves (or never does) adds no
within-problem variance, so its further samples buy nothing. "Settled" names exactly those
problems, with an error rate that is controlled: the chance that *any* look of a problem's rounds
settles it on the wrong side of ``margin`` is at most ``alpha``. With the default ``margin`` = 1/2
the settled side is whether the model solves the problem more often than not (the question a
majority vote answers), the only side the first rounds of k = 16 can settle at ``alpha`` = 0.05 —
an all-correct start settles it after 7 samples (so at 8 with rounds of 4); a tighter margin needs
more samples before any stop (0.3 needs 14, 0.2 needs 24).

Comparing checkpoints reuses these per-problem stopped runs: a sweep loads one checkpoint at a
time, so a rule that needs two checkpoints' samples side by side cannot drive it.
``bench/bench_adaptive.py`` measures how often the paired comparison's verdict stays what fixed k
gives: with margin 1/2 it drops the small differences on nearly-solved problems that a paired test
feeds on (at k = 64 a real loss of power), so comparisons want a smaller margin (0.2 at k = 64);
the figures are in the performance log.

Why this confidence sequence: the Beta-binomial mixture martingale (Robbins 1970; Howard et al.
2021). For a candidate p, ``M_n(p) = B(c + a, n − c + a) / B(a, a) / (p^c (1 − p)^(n − c))`` is a
nonnegative martingale with mean 1 under p, so by Ville's inequality it ever exceeds 1/alpha with
probability at most alpha, whatever the number of looks or when one stops; the CS is
``{p : M_n(p) < 1/alpha}``. Refused: Clopper–Pearson with Bonferroni over the planned rounds — it
must know the number of looks in advance (a rerun with a larger k would void it) and is looser
at k = 16 and 64 (all-correct bound after 8 of 8 at alpha 0.05: 0.53 with k = 16's 4 looks, 0.56
here). The mixing prior Beta(a, a) with a = 1/2 (Jeffreys) puts more weight near 0 and
1 than the uniform prior, which is where settling happens: all-correct settles above 1/2 after
7 samples with a = 1/2 (uniform: 8) and above 0.7 after 14 (uniform: 17).

Because ``log M_n`` is convex in p with its minimum at p̂ = c/n, "the CS lies below ``margin``" is
"p̂ < margin and ``M_n(margin)`` ≥ 1/alpha": one closed form, no root finding
(:func:`settled`). The stopped estimate c/n is biased towards 0 and 1 (a problem stops on a run of
agreeing samples); the bench measures that bias.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from pr1_eval.errors import Pr1EvalError

RULE_NAME = "beta-binomial mixture confidence sequence, per problem"
#: Bisection steps of :func:`confidence_sequence` (interval width 2^-60: below float resolution).
_BISECTIONS = 60


@dataclass(frozen=True)
class StopRule:
    """The rule's parameters, as ``run.json``'s ``adaptive`` section records them."""

    max_k: int
    round_size: int = 4
    alpha: float = 0.05
    margin: float = 0.5
    prior: float = 0.5

    def check(self) -> StopRule:
        """The same rule, or a one-line error naming the bad parameter."""
        if self.max_k < 1 or self.round_size < 1:
            raise Pr1EvalError(f"--adaptive needs -k ≥ 1 and --round-size ≥ 1, got -k {self.max_k}, "
                               f"--round-size {self.round_size}")
        if not 0 < self.alpha < 1:
            raise Pr1EvalError(f"--adaptive-alpha must be between 0 and 1, got {self.alpha}")
        if not 0 < self.margin <= 0.5:
            raise Pr1EvalError(f"--adaptive-margin must be in (0, 0.5], got {self.margin}: a problem is settled "
                               "when its p is surely below the margin or above 1 − margin")
        if not self.prior > 0:
            raise Pr1EvalError(f"the mixing prior must be positive, got {self.prior}")
        return self

    def boundaries(self) -> list[int]:
        """Sample counts at which the rule looks: every ``round_size`` samples, and ``max_k``."""
        return sorted({*range(self.round_size, self.max_k, self.round_size), self.max_k})

    def to_dict(self) -> dict[str, Any]:
        return {"rule": RULE_NAME, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StopRule:
        return cls(int(data["max_k"]), int(data["round_size"]), float(data["alpha"]), float(data["margin"]),
                   float(data.get("prior", 0.5)))


def log_mixture(c: Any, n: Any, p: Any, prior: float = 0.5) -> np.ndarray:
    """log M_n(p) of the module docstring, elementwise (p = 0 or 1 give +inf where impossible).
    scipy.special is imported here: it takes about a second, and every report and leaderboard
    imports this module (for adaptive runs' completeness) while only adaptive runs call this."""
    from scipy.special import betaln, xlogy

    c, n, p = np.asarray(c, dtype=float), np.asarray(n, dtype=float), np.asarray(p, dtype=float)
    with np.errstate(divide="ignore"):
        likelihood = xlogy(c, p) + xlogy(n - c, 1 - p)
    return betaln(c + prior, n - c + prior) - betaln(prior, prior) - likelihood


def settled(c: Any, n: Any, rule: StopRule) -> np.ndarray:
    """Per problem: −1 settled below ``margin``, +1 settled above ``1 − margin``, 0 not settled."""
    c, n = np.asarray(c, dtype=float), np.asarray(n, dtype=float)
    level = math.log(1 / rule.alpha)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(n > 0, c / np.maximum(n, 1), 0.5)
    low = (n > 0) & (share < rule.margin) & (log_mixture(c, n, rule.margin, rule.prior) >= level)
    high = (n > 0) & (share > 1 - rule.margin) & (log_mixture(c, n, 1 - rule.margin, rule.prior) >= level)
    return high.astype(np.int8) - low.astype(np.int8)


def confidence_sequence(c: Any, n: Any, alpha: float, prior: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """The CS's bounds for p after c successes in n draws, elementwise (vectorised bisection on the
    two monotone halves of log M_n around p̂; [0, 1] where n = 0)."""
    c, n = np.broadcast_arrays(np.asarray(c, dtype=float), np.asarray(n, dtype=float))
    share = np.where(n > 0, c / np.maximum(n, 1), 0.5)
    level = math.log(1 / alpha)

    def edge(outside: np.ndarray, inside: np.ndarray) -> np.ndarray:
        for _ in range(_BISECTIONS):
            middle = (outside + inside) / 2
            excluded = log_mixture(c, n, middle, prior) >= level
            outside, inside = np.where(excluded, middle, outside), np.where(excluded, inside, middle)
        return inside

    low = np.where(c > 0, edge(np.zeros_like(share), share.copy()), 0.0)
    high = np.where(c < n, edge(np.ones_like(share), share.copy()), 1.0)
    return np.where(n > 0, low, 0.0), np.where(n > 0, high, 1.0)


def stopping_points(correct: np.ndarray, rule: StopRule) -> np.ndarray:
    """Samples each problem draws under ``rule``: ``correct`` is (problems × at least max_k) verdicts
    in draw order; a problem stops at the first round boundary where it is settled, else at max_k."""
    correct = np.asarray(correct, dtype=bool)
    if correct.ndim != 2 or correct.shape[1] < rule.max_k:
        raise ValueError(f"need a (problems × ≥{rule.max_k}) verdict matrix, got shape {correct.shape}")
    bounds = np.array(rule.boundaries())
    counts = np.cumsum(correct[:, : rule.max_k], axis=1)[:, bounds - 1]
    done = settled(counts, np.broadcast_to(bounds, counts.shape), rule) != 0
    done[:, -1] = True
    return np.asarray(bounds[np.argmax(done, axis=1)])


def required_samples(verdicts: np.ndarray, rule: StopRule) -> int:
    """How many samples a problem needs, given the verdicts it holds (in sample order): the first
    round boundary within them where it is settled, else ``max_k``. A problem holding fewer is
    unfinished (the run stopped mid-way), whatever its verdicts so far."""
    held = np.asarray(verdicts, dtype=bool)
    bounds = np.array([b for b in rule.boundaries() if b <= len(held)], dtype=int)
    if bounds.size:
        counts = np.cumsum(held)[bounds - 1]
        hit = np.flatnonzero(settled(counts, bounds, rule) != 0)
        if hit.size:
            return int(bounds[hit[0]])
    return rule.max_k
