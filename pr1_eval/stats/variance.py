"""How much of Mean@k's uncertainty is which problems a benchmark holds, and how much is sampling.

The model (Miller, "Adding Error Bars to Evals", 2024, §3): a benchmark's P problems are drawn
from a population; problem i has a true solve rate p_i; its n samples give c_i ~ Binomial(n, p_i)
and p̂_i = c_i / n. Mean@k's estimate M = (1/P) Σ p̂_i then has

    Var(M) = (1/P) · [ Var(p) + E[p(1 − p)] / n ]
           =          between        +     within(n)

* **between** = Var(p) / P: the spread of the true solve rates over problems — which problems the
  benchmark happens to hold. More samples per problem never shrink it.
* **within(n)** = E[p(1 − p)] / (n · P): the Bernoulli noise of n samples per problem; ∝ 1/n.

Unbiased estimates from one run (:func:`variance_split`):

* ``p̂_i(1 − p̂_i) · n_i / (n_i − 1)`` is unbiased for ``p_i(1 − p_i)`` (the sample variance of
  n_i Bernoulli draws), so ``within_problem = mean_i p̂_i(1 − p̂_i) n_i/(n_i − 1)`` estimates
  E[p(1 − p)], and ``mean_i p̂_i(1 − p̂_i)/(n_i − 1)`` estimates E[p(1−p)]/n, the within-problem
  sampling variance of one p̂_i.
* The sample variance s² of the p̂_i (ddof 1) is unbiased for Var(p̂) = Var(p) + E[p(1−p)]/n, so
  ``between_problem = s² − mean_i p̂_i(1 − p̂_i)/(n_i − 1)`` is unbiased for Var(p). It can come out
  negative when the problems differ less than their sampling noise: it is written as estimated
  (clipping would bias it upwards); :func:`required_k` reads a value ≤ 0 as "no spread detected".
* between + within = s²/P exactly, so ``se = s/√P``, the usual standard error of a mean over problems.

Why the problem-sampling view: it is the one in which the benchmark's interval (the report's
bootstrap over problems) is an interval. If a benchmark is instead the fixed object of interest
(this very AIME, not "AIME-like problems"), only ``within`` is uncertainty, and it is reported apart.

Minimum detectable effect (:func:`minimum_detectable_effect`) of a paired comparison over P shared
problems with per-problem differences d_i: ``MDE = (z_{1−α/2} + z_{power}) · SD(d) / √P`` — the
true mean difference a two-sided level-α paired z-test detects with probability ``power`` (the
far tail, below 1e-4 at 80 %, is ignored). SD(d) is the **observed** sample SD of the paired
differences (ddof 1), taken as the SD under the alternative. The leaderboard's own test is the
sign-flip permutation test; for the normal-shaped differences of a mean over ≥ 30 problems its
power is close to the z-test's, and at P = 30 the z quantile makes the MDE a few per cent small
(Student's t_{29} would give 2.05 in place of 1.96). With every difference 0 the SD and so the MDE
would be 0, which the formula cannot mean (it says nothing about power then): the MDE is None
("-"), as it is where the sign-flip test cannot reject at all (P ≤ 5 at α = 0.05).

Required k (:func:`required_k`): the smallest k at which within(k) is at most a share ``f``
(:data:`WITHIN_SHARE`, 10 %) of Var(Mean@k): ``k ≥ (1 − f)/f · E[p(1−p)] / Var(p)``. Past it, even
infinitely many samples per problem narrow the interval by at most 1 − √(1 − f) ≈ 5 % of its width:
the problems, not the samples, set the interval. None when no between-problem spread is detected
(``between_problem ≤ 0``): then every sample still narrows the interval and no k is "enough".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

#: Two-sided level of the paired test the MDE is for.
MDE_ALPHA = 0.05
#: Power at which an effect counts as detectable.
MDE_POWER = 0.80
#: Required k: the within-problem share of Var(Mean@k) it allows.
WITHIN_SHARE = 0.10


@dataclass(frozen=True)
class VarianceParts:
    """:func:`variance_split`'s estimates for one task (see the module docstring for each)."""

    n_problems: int
    samples_per_problem: float  # mean n_i (every problem holds k in a complete task)
    between_problem: float  # Var(p) over problems, unbiased (may be < 0)
    within_problem: float  # E[p(1 − p)]: one sample's Bernoulli variance, averaged over problems
    between: float  # between_problem / P: its part of Var(Mean@k)
    within: float  # mean_i p̂_i(1 − p̂_i)/(n_i − 1) / P: the sampling part of Var(Mean@k) at these n
    total: float  # between + within = s² / P
    se: float  # √total

    @property
    def within_share(self) -> float | None:
        """within / total (None when total is 0: every problem all right or all wrong)."""
        return self.within / self.total if self.total > 0 else None

    def se_at(self, k: int) -> float:
        """Predicted standard error of Mean@k had each problem been given k samples (same problems)."""
        return math.sqrt(max(self.between_problem + self.within_problem / k, 0.0) / self.n_problems)


def variance_split(c: Sequence[int] | np.ndarray, n: Sequence[int] | np.ndarray) -> VarianceParts | None:
    """Between/within split of Var(Mean@k) from per-problem correct counts ``c`` of ``n`` samples.

    None with fewer than 2 problems or a problem of fewer than 2 samples (neither variance is
    estimable then)."""
    c_arr, n_arr = np.asarray(c, dtype=float), np.asarray(n, dtype=float)
    if c_arr.shape != n_arr.shape or c_arr.ndim != 1:
        raise ValueError(f"c and n must be flat and aligned, got shapes {c_arr.shape} and {n_arr.shape}")
    if np.any(c_arr < 0) or np.any(c_arr > n_arr):
        raise ValueError("need 0 <= c <= n for every problem")
    if c_arr.size < 2 or np.any(n_arr < 2):
        return None
    p = c_arr / n_arr
    bernoulli = p * (1 - p)
    noise = float(np.mean(bernoulli / (n_arr - 1)))  # E[p(1−p)/n]: sampling variance of one p̂
    s2 = float(np.var(p, ddof=1))
    size = c_arr.size
    return VarianceParts(
        n_problems=size, samples_per_problem=float(n_arr.mean()), between_problem=s2 - noise,
        within_problem=float(np.mean(bernoulli * n_arr / (n_arr - 1))), between=(s2 - noise) / size,
        within=noise / size, total=s2 / size, se=math.sqrt(s2 / size))


def required_k(parts: VarianceParts, share: float = WITHIN_SHARE) -> int | None:
    """Smallest k with within(k) ≤ ``share`` · (between + within(k)); None when no spread is detected.

    1 when no problem shows sampling noise (each all right or all wrong): nothing is left to narrow."""
    if not 0 < share < 1:
        raise ValueError(f"share must lie in (0, 1), got {share}")
    if parts.within_problem <= 0:
        return 1
    if parts.between_problem <= 0:
        return None
    bound = (1 - share) / share * parts.within_problem / parts.between_problem
    k = max(1, math.ceil(bound - 1e-9 * bound))  # float slack: a bound of exactly 9.0 is k = 9
    return k


def required_k_reason(parts: VarianceParts, share: float = WITHIN_SHARE) -> str:
    """Why :func:`required_k` is what it is, in words a report prints beside it (a bare "1" on a task the
    model never solved reads as a claim that one sample is enough to know the model)."""
    k = required_k(parts, share)
    if parts.within_problem <= 0:
        return ("1: every problem's samples all agree (each all right or all wrong), so no sampling noise is left "
                "for more samples to average out; one sample per problem already gives the same mean")
    if k is None:
        return (f"not estimable with {parts.n_problems} problems: they differ no more than their sampling noise "
                "(between-problem estimate ≤ 0), so every further sample still narrows the interval")
    return f"{k}: from k = {k} on, sampling is at most {share:.0%} of Var(mean@k)"


def sampling_variance(c: Sequence[int] | np.ndarray, n: Sequence[int] | np.ndarray) -> float:
    """Estimated Var(Mean@k) for *these* problems, Σ_i p̂_i(1 − p̂_i)/(n_i − 1) / P²: :attr:`VarianceParts.within`.

    Unbiased for the true Σ p_i(1 − p_i)/n_i / P². Why no smoothing (a pseudo-count on p̂): on the
    real trajectories the plain estimate already covers at 94–96 % with the width of the interval
    that knows the true variance (0.97–1.03×); (c + 1)/(n + 2) took the width to 1.21–1.31×."""
    c_arr, n_arr = np.asarray(c, dtype=float), np.asarray(n, dtype=float)
    p = c_arr / n_arr
    return float(np.sum(p * (1 - p) / (n_arr - 1))) / c_arr.size ** 2


def sampling_interval(c: Sequence[int] | np.ndarray, n: Sequence[int] | np.ndarray,
                      confidence: float = 0.95) -> tuple[float, float] | None:
    """Interval of Mean@k whose estimand is *these problems*: the mean over this benchmark's own
    problems of their solve rates, only the samples random (None with a problem of < 2 samples).

    mean ± z·√(:func:`sampling_variance`): a normal interval, the mean of P·n Bernoulli draws. It is
    the interval for "did this checkpoint do better on AIME 2024", where the bootstrap over problems
    (:func:`pr1_eval.stats.metrics.bootstrap_ci`) is the one for "on problems like AIME's"; it is
    much narrower once k is past required k, since it leaves out which problems were drawn."""
    c_arr, n_arr = np.asarray(c, dtype=float), np.asarray(n, dtype=float)
    if c_arr.size < 1 or np.any(n_arr < 2):
        return None
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    mean = float(np.mean(c_arr / n_arr))
    half = z * math.sqrt(sampling_variance(c_arr, n_arr))
    return mean - half, mean + half


def mde_multiplier(alpha: float = MDE_ALPHA, power: float = MDE_POWER) -> float:
    """z_{1−α/2} + z_{power}: 2.80 at α = 0.05 and 80 % power."""
    normal = NormalDist()
    return normal.inv_cdf(1 - alpha / 2) + normal.inv_cdf(power)


def minimum_detectable_effect(diffs: Sequence[float] | np.ndarray, alpha: float = MDE_ALPHA,
                              power: float = MDE_POWER) -> float | None:
    """MDE of a paired comparison from its per-problem differences; None where no effect is detectable.

    None (printed "-") with < 2 problems, with every difference equal (SD 0: the formula would say
    0.000, "any delta is detected", which is the opposite of the truth), and with fewer problems than
    the sign-flip test needs to reject at all: its smallest two-sided p-value with m differences is
    2/2^m, so at α = 0.05 it can never reject with m ≤ 5 (2/32 = 0.0625), whatever the effect."""
    d = np.asarray(diffs, dtype=float)
    if d.ndim != 1 or not np.isfinite(d).all():
        raise ValueError("paired differences must be a flat sequence of finite numbers")
    if d.size < 2 or 2.0 / 2.0 ** d.size > alpha or float(np.std(d, ddof=1)) == 0.0:
        return None
    return mde_multiplier(alpha, power) * float(np.std(d, ddof=1)) / math.sqrt(d.size)

