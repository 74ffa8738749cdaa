"""Is checkpoint A better than B on these problems? The fixed-k test, looked at after every round with α spent.

**The estimand** is the one of :mod:`pr1_eval.stats.paired_sequential`: Δ = (1/P) Σ_i (p_A,i − p_B,i)
over *these* P problems. **The statistic** at a look where both checkpoints hold n samples of every
problem is the fixed-k test's, exactly: Δ̂ = (1/P) Σ_i d̄_i and SE² = (1/P²) Σ_i s_i²/n, with d̄_i and
s_i² the mean and sample variance (ddof 1) of problem i's paired differences d_ij = x_A,ij − x_B,ij.
So a sweep that runs to k_max and never stops early decides what fixed k = k_max decides, up to the
small rise of the last boundary; one that stops early spends fewer samples.

**α is spent over the looks** (Lan and DeMets 1983, "Discrete sequential boundaries for clinical
trials", Biometrika): a spending function a(t) says how much of a one-sided level a has been used by
the information fraction t = n/k_max (:data:`SPENDING`). The boundary c_l at look l is the z that
makes the chance of first crossing there, under Δ = m, equal a(t_l) − a(t_{l−1}), for the score
process Z_l √t_l with independent normal increments (Jennison and Turnbull 2000, *Group Sequential
Methods*, ch. 7 and 19: the recursive integration of :func:`boundary_table`). The default spending is
O'Brien–Fleming's, a(t) = 2 − 2Φ(z_{1−a/2}/√t): almost nothing early (a pair 40 points apart still
stops at the first look, a pair 3 points apart waits), so the last boundary is within a few percent
of the fixed-k z. Pocock's, a log(1 + (e − 1)t), stops earlier and pays at the end.

**The repeated p-value** of a hypothesis at a look (Jennison and Turnbull, ch. 9) is the smallest
level at which the design would have crossed by then: for every look l, the level whose boundary at
l equals the z seen there (interpolated in a table over levels), minimised over looks. Under the
null it is ≤ u with probability ≤ u at every look up to k_max, however the looks fell among the
table's; and a Holm step-down over such p-values, each hypothesis's level raised as others are
rejected, keeps the family-wise error (Maurer and Bretz 2013, "Multiple testing in group sequential
trials using graphical approaches", Stat. Biopharm. Res.). That is how
:mod:`pr1_eval.stats.ranking_sequential` uses it, exactly as it uses the confidence sequence's.

**What this rule assumes that the confidence sequence does not.** (1) A maximum: looks end at
k_max (a sweep states it); past it the rule has no level left, where the confidence sequence runs
for ever. (2) The normal approximation to Δ̂ with an estimated SE, as the fixed-k z-test assumes:
with 30 problems and n ≥ 4 samples its error is measured, not proved (``bench/bench_ranking.py``:
the family-wise error on real trajectories). (3) Looks at the table's fractions or a subset of them:
a pair whose checkpoint skipped a round just misses that look's α, which is conservative. Looks with
n < 2 carry no variance and test nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

#: Spending functions a(level, t), t in (0, 1]: the one-sided level used by fraction t.
SPENDING: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "obrien-fleming": lambda a, t: 2 * ndtr(ndtri(a / 2) / np.sqrt(t)),
    "pocock": lambda a, t: a * np.log1p((math.e - 1) * t),
}
#: Levels of the table the repeated p-values are read from (log-spaced; smaller p-values read as the smallest).
LEVELS = np.geomspace(1e-12, 0.5, 241)
_SCORE_EDGE = 10.0  # the score grid spans ±10 (its variance is t ≤ 1)
_SCORE_POINTS = 1601
_NO_CROSSING = 1e3  # the boundary where a look may spend nothing


def _density(x: np.ndarray) -> np.ndarray:
    """The standard normal density (scipy.special has the tails; scipy.stats costs seconds to import)."""
    return np.asarray(np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))


@lru_cache(maxsize=64)
def boundary_table(fractions: tuple[float, ...], spending: str = "obrien-fleming") -> np.ndarray:
    """Boundaries c[l, g] (looks × :data:`LEVELS`): the one-sided z at look l of a design at level LEVELS[g]
    with looks at the information ``fractions`` (increasing, the last ≤ 1). Cached: a sweep has one schedule."""
    return boundaries(fractions, LEVELS, spending)


def boundaries(fractions: Sequence[float], levels: Any, spending: str = "obrien-fleming") -> np.ndarray:
    """Boundaries c[l, g] at looks ``fractions`` for one-sided ``levels`` (the recursive integration)."""
    levels = np.atleast_1d(np.asarray(levels, dtype=float))
    t = np.asarray(fractions, dtype=float)
    if t.size == 0 or (np.diff(t) <= 0).any() or t[0] <= 0 or t[-1] > 1 + 1e-12:
        raise ValueError(f"information fractions must increase within (0, 1], got {fractions}")
    if spending not in SPENDING:
        raise ValueError(f"unknown spending function {spending!r}; choose one of {', '.join(SPENDING)}")
    spent = SPENDING[spending](levels[None, :], t[:, None])  # looks × levels, cumulative
    grid = np.linspace(-_SCORE_EDGE, _SCORE_EDGE, _SCORE_POINTS)
    step = grid[1] - grid[0]
    out = np.empty((len(t), len(levels)))
    out[0] = np.minimum(-ndtri(spent[0]), _NO_CROSSING)
    density = np.broadcast_to(_density(grid / np.sqrt(t[0])) / np.sqrt(t[0]), (len(levels), grid.size))
    density = np.where(grid[None, :] < out[0][:, None] * np.sqrt(t[0]), density, 0.0) * step
    for look in range(1, len(t)):
        sd = math.sqrt(t[look] - t[look - 1])
        target = spent[look] - spent[look - 1]
        out[look] = _solve_boundary(density, grid, sd, math.sqrt(t[look]), target)
        kernel = _density((grid[None, :] - grid[:, None]) / sd) / sd * step
        density = density @ kernel
        density = np.where(grid[None, :] < out[look][:, None] * math.sqrt(t[look]), density, 0.0)
    return out


def _solve_boundary(mass: np.ndarray, grid: np.ndarray, sd: float, root_t: float, target: np.ndarray) -> np.ndarray:
    """The z per level whose first-crossing chance from the continuation ``mass`` equals ``target``: the chance
    for a boundary at every grid point at once (one product with the normal tail), then read off in log scale."""
    tails = ndtr((grid[:, None] - grid[None, :]) / sd)  # [s, u]: from score s, above u at the next look
    crossing = np.log(np.maximum(mass @ tails, 1e-300))  # levels × boundary positions, decreasing in u
    out = np.full(target.shape, _NO_CROSSING)
    for g in np.flatnonzero(target > 0):
        at = np.interp(np.log(target[g]), crossing[g, ::-1], grid[::-1])
        out[g] = min(at / root_t, _NO_CROSSING)
    return out


def repeated_p(z: Any, look: Any, table: np.ndarray) -> np.ndarray:
    """The level at which look ``look`` (an index into ``table``'s rows, any shape with ``z``) would just
    cross with statistic ``z``: interpolated in log level; ≥ 1 where even level 0.5 does not cross."""
    z, look = np.broadcast_arrays(np.asarray(z, dtype=float), np.asarray(look))
    out = np.ones(z.shape)
    logs = np.log(LEVELS)
    for row in np.unique(look[look >= 0]):
        where = look == row
        c = table[row]  # decreasing in the level
        p = np.exp(np.interp(z[where], c[::-1], logs[::-1], left=np.log(2.0), right=logs[0]))
        out[where] = np.where(z[where] >= c[-1], np.minimum(p, LEVELS[-1]), 1.0)
    return out


@dataclass(frozen=True)
class ZEvidence:
    """A pair's statistic at its looks (leading axes any, then n = 1 … samples): Δ̂ and its SE (nan for n < 2)."""

    estimate: np.ndarray
    se: np.ndarray

    def at(self, index: np.ndarray) -> ZEvidence:
        """The statistic at look ``index`` (one index per leading position; −1: none held, SE nan)."""
        i = np.maximum(index, 0)[..., None]
        held = index >= 0
        return ZEvidence(np.where(held, np.take_along_axis(self.estimate, i, axis=-1)[..., 0], 0.0),
                         np.where(held, np.take_along_axis(self.se, i, axis=-1)[..., 0], np.nan))


def z_evidence(diffs: Any) -> ZEvidence:
    """Δ̂ and SE after every n = 1 … samples of ``diffs`` (… × problems × samples, values in [−1, 1])."""
    d = np.asarray(diffs, dtype=float)
    if d.ndim < 2:
        raise ValueError(f"need (problems × samples) differences, got shape {d.shape}")
    n = np.arange(1, d.shape[-1] + 1, dtype=float)
    total, squares = np.cumsum(d, axis=-1), np.cumsum(d * d, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        variance = np.where(n > 1, (squares - total ** 2 / n) / (n - 1), np.nan)
    problems = d.shape[-2]
    se = np.sqrt(np.maximum(variance, 0.0).sum(axis=-2) / (problems ** 2 * n)) + 1e-12
    return ZEvidence(total.sum(axis=-2) / (problems * n), np.where(n > 1, se, np.nan))


def look_p_values(ev: ZEvidence, delta: float, look: Any, table: np.ndarray) -> list[np.ndarray]:
    """The four one-sided repeated p-values of a look, in :class:`pr1_eval.stats.ranking_sequential.Running`'s
    order: Δ ≤ 0, Δ ≥ 0, Δ ≤ −δ, Δ ≥ δ (1 where the look holds fewer than two samples)."""
    known = np.isfinite(ev.se)
    se = np.where(known, ev.se, 1.0)
    zs = [ev.estimate / se, -ev.estimate / se, (ev.estimate + delta) / se, (delta - ev.estimate) / se]
    return [np.where(known, repeated_p(z, look, table), 1.0) for z in zs]


def fractions_of(looks: Sequence[int], k_max: int) -> tuple[float, ...]:
    """Information fractions n/k_max of ``looks`` (sample counts; where one passes k_max, the largest is 1)."""
    top = max(k_max, max(looks))
    return tuple(float(n) / top for n in sorted(set(looks)))


def interval(ev: ZEvidence, look: Any, table: np.ndarray, level: Any) -> tuple[np.ndarray, np.ndarray]:
    """Δ̂ ∓ c·SE with c the boundary at ``look`` for one-sided ``level`` (a repeated confidence interval; for display
    and for the "MDE reached")."""
    logs = np.log(LEVELS)
    look = np.asarray(look)
    c = np.empty(np.shape(look))
    for row in np.unique(look):
        c[look == row] = np.interp(np.log(np.broadcast_to(level, np.shape(look))[look == row]), logs,
                                   table[max(int(row), 0)])
    se = np.where(np.isfinite(ev.se), ev.se, np.inf)
    return ev.estimate - c * se, ev.estimate + c * se
