"""Spearman's ρ of a series against its steps, and THE two-sided p-value every trend reports.

A claim about a trend over checkpoints needs a test: Spearman's ρ (rank-based, so robust to the
uneven spacing of saved steps) with one p-value, computed by :func:`spearman_test`. ``p_method``
says how:

* up to :data:`EXACT_MAX_STEPS` points, ``"exact permutation (n! = 24)"``: the share of all n!
  orderings of the values whose |ρ| is at least the observed one. Why: scipy's p-value is a
  t approximation that is badly off for a handful of checkpoints (0.0 for a perfect trend over
  3 or 4 steps, where the exact p is 1/3 or 1/12), and a sweep rarely has more than 8 checkpoints.
  Ties are ranked by average ranks, exactly as scipy's ρ, and every ordering of the tied values
  counts once, so the null distribution is the one of the statistic reported;
* beyond that, ``"t-approximation (n = 12)"``: scipy's, which is accurate by then.

ρ and the t approximation are scipy's ``spearmanr`` (1.17) computed step for step here (average
ranks, ``np.corrcoef`` of the ranks laid out as scipy lays them out, the t statistic on the 2×2
matrix, Student's t tail from ``scipy.special.stdtr``), not a call to it. Why: importing
``scipy.stats`` cost 0.4 s of CPU in every ``analyze`` for one function; ``scipy.special`` is a
third of that. The numbers are scipy's to the last bit (``tests/pr1_eval/stats/test_spearman.py``
compares them with ``==`` on thousands of series, ties, constants and NaN included).

Reference: Kendall & Gibbons, *Rank Correlation Methods* (5th ed., 1990), ch. 4 (the exact null
distribution of ρ by enumeration; the t approximation for larger n).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Up to this many points the p-value is the exact permutation one (8! = 40,320 orderings, ~10 ms).
EXACT_MAX_STEPS = 8


@functools.lru_cache(maxsize=EXACT_MAX_STEPS + 1)
def _orderings(n: int) -> np.ndarray:
    """All n! orderings of ``range(n)``, one per row (8! × 8 small integers: 320 kB)."""
    return np.array(list(itertools.permutations(range(n))), dtype=np.intp)


def exact_spearman_p(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float | None:
    """Two-sided exact permutation p-value of Spearman's ρ: the share of the n! orderings of ``y``
    whose |ρ| reaches the observed |ρ|. ``None`` above :data:`EXACT_MAX_STEPS` points, below 2, or
    when either series is constant (ρ undefined).

    Ties get average ranks (scipy's ρ); permuting the ranks of ``y`` is permuting ``y``, so tied
    values are reordered like any others and each of the n! orderings counts once.
    """
    n = len(x)
    if n > EXACT_MAX_STEPS or n < 2 or len(y) != n:
        return None
    a = average_ranks(np.asarray(x, dtype=float))
    b = average_ranks(np.asarray(y, dtype=float))
    a, b = a - a.mean(), b - b.mean()
    denom = math.sqrt(float((a * a).sum() * (b * b).sum()))
    if not denom:
        return None
    observed = abs(float(a @ b)) / denom
    rhos = np.abs(b[_orderings(n)] @ a) / denom
    # distinct values of ρ differ by far more than 1e-9 (ρ is a ratio of small integers over n ≤ 8)
    return float(np.mean(rhos >= observed - 1e-9))


def p_method_name(n_points: int) -> str:
    """How :func:`spearman_test` computes the p-value of ``n_points`` points, as ``p_method`` says it."""
    if 2 <= n_points <= EXACT_MAX_STEPS:
        return f"exact permutation (n! = {math.factorial(n_points):,})"
    return f"t-approximation (n = {n_points})"


def average_ranks(values: np.ndarray) -> np.ndarray:
    """``scipy.stats.rankdata(values)`` (ties get the mean of their ranks) of a 1-D float array: each
    value's rank is ``first + (count - 1) / 2`` of its group of equal values in sorted order, a
    half-integer, exact in float64 whatever order it is computed in; all NaN when one is (scipy's
    ``propagate``)."""
    if np.isnan(values).any():
        return np.full(len(values), np.nan)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    counts = np.diff(np.append(starts, len(values)))
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.repeat((starts + 1) + (counts - 1) / 2, counts)
    return ranks


def spearman_r(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``scipy.stats.spearmanr(x, y)`` as (statistic, two-sided p-value), the same floats: NaN for
    both below two points, for a constant series or a NaN anywhere (scipy's ``propagate``), else
    ρ from ``np.corrcoef`` of the ranks and p from Student's t with n - 2 degrees of freedom."""
    n = len(x)
    if n <= 1 or (x[0] == x).all() or (y[0] == y).all() or np.isnan(x).any() or np.isnan(y).any():
        return math.nan, math.nan
    from scipy.special import stdtr

    ranked = np.apply_along_axis(average_ranks, 0, np.column_stack((x, y)))  # scipy's layout, so its sums
    rs = np.corrcoef(ranked, rowvar=False)
    dof = n - 2
    with np.errstate(divide="ignore"):
        t = rs * np.sqrt((dof / ((rs + 1.0) * (1.0 - rs))).clip(0))
    prob = 2 * stdtr(dof, -np.abs(t))
    return float(rs[1, 0]), float(prob[1, 0])


def spearman_test(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> dict[str, Any]:
    """Spearman's ρ of ``y`` against ``x`` and THE p-value every surface reports: ``spearman_rho``,
    ``p_value`` and ``p_method`` (exact up to :data:`EXACT_MAX_STEPS` points, else scipy's t
    approximation; see the module docstring). Nulls when ρ is undefined (a constant series)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rho, t_p = spearman_r(xs, ys)
    if math.isnan(rho):
        return {"spearman_rho": None, "p_value": None, "p_method": None}
    if len(xs) <= EXACT_MAX_STEPS:
        p: float | None = exact_spearman_p(xs, ys)
    else:
        p = None if math.isnan(t_p) else t_p
    return {"spearman_rho": rho, "p_value": p, "p_method": p_method_name(len(xs))}
