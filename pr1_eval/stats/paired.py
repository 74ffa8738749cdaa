"""Paired statistics over problems: is run A really better than run B on the same questions?

Why paired: two runs scored on the same problems share each problem's difficulty, so the
per-problem differences ``d_i = a_i − b_i`` vary far less than either run's scores (Miller,
"Adding Error Bars to Evals", 2024). On AIME (30 problems) two separate 95% intervals overlap
for almost any pair of checkpoints, while the paired interval of the difference is often clear
of zero. Everything here takes per-problem values (mean@K per problem, c/n) and is pure.

* :func:`paired_bootstrap_ci` — percentile interval of the mean difference, resampling
  problems with replacement: the report's own :func:`pr1_eval.stats.metrics.bootstrap_ci`
  (10,000 resamples, seed 0: the same runs give the same interval). Differences come in
  task × problem-id order (the leaderboard's pivot), so file order does not move it.
* :func:`sign_flip_test` — two-sided paired permutation test. Under "no difference" each
  problem's difference is as likely to have either sign, so the null distribution of the
  statistic ``T = Σ w_i d_i`` (the mean of the differences when the weights are 1/n) comes from
  flipping signs. Problems with ``d_i = 0`` never change ``T`` and are left out; up to
  :data:`EXACT_MAX_NONZERO` non-zero differences all 2^m sign patterns are enumerated (exact
  p-value), beyond that :data:`MONTE_CARLO_DRAWS` random patterns with a fixed seed give
  ``(1 + hits) / (1 + draws)`` (never 0, Phipson & Smyth 2010).
* :func:`holm` — Holm's step-down adjustment across the tasks of one comparison.
* ``mde`` of :func:`paired_comparison` — the minimum detectable effect at 80 % power and two-sided
  5 % (:func:`pr1_eval.stats.variance.minimum_detectable_effect`): 2.80 · SD(d) / √P with the
  observed sample SD of the paired differences (ddof 1, written as ``diff_sd``). A delta smaller than
  it that the test did not reject says little: such a comparison was unlikely to detect it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from pr1_eval.stats.metrics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, bootstrap_ci
from pr1_eval.stats.variance import minimum_detectable_effect, sampling_variance

#: Up to this many non-zero differences the permutation p-value is exact (2^20 ≈ 10^6 patterns).
EXACT_MAX_NONZERO = 20
#: Random sign patterns drawn beyond :data:`EXACT_MAX_NONZERO`.
MONTE_CARLO_DRAWS = 10_000
#: Seed of the bootstrap and of the Monte Carlo permutation test (results are reproducible).
SEED = BOOTSTRAP_SEED
#: Resamples per chunk, so memory stays bounded for large problem sets (MATH-500 × 10,000).
_CHUNK = 1_000
#: Sign flips kept per seed (bytes): 10,000 patterns of 5,000 problems.
FLIPS_KEPT = 50_000_000
_FLIP_BLOCK = 1 << 20
_FLIPS: dict[int, tuple[np.random.Generator, np.ndarray]] = {}
_FLIPS_LOCK = threading.Lock()


@dataclass(frozen=True)
class PermutationResult:
    """A sign-flip test: two-sided p-value, how it was computed, and how many differences counted."""

    p_value: float
    method: str  # "exact" | "monte_carlo" | "no_difference"
    n_nonzero: int
    statistic: float


def _as_array(values: Sequence[float] | np.ndarray) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"expected a flat sequence of per-problem values, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError("per-problem values must be finite numbers")
    return array


def paired_bootstrap_ci(diffs: Sequence[float] | np.ndarray, *, n_resamples: int = BOOTSTRAP_RESAMPLES,
                        alpha: float = 0.05, seed: int = SEED) -> tuple[float, float] | None:
    """Percentile interval of the mean of ``diffs`` under resampling of problems; None with < 2."""
    return bootstrap_ci(_as_array(diffs), n_resamples=n_resamples, alpha=alpha, seed=seed)


def _all_sign_sums(terms: np.ndarray) -> np.ndarray:
    """Σ ±terms_i for all 2^len(terms) sign patterns."""
    sums = np.zeros(1)
    for term in terms:
        sums = np.concatenate([sums + term, sums - term])
    return sums


def sign_flip_test(diffs: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray | None = None, *,
                   exact_max_nonzero: int = EXACT_MAX_NONZERO, n_draws: int = MONTE_CARLO_DRAWS,
                   seed: int = SEED) -> PermutationResult:
    """Two-sided paired sign-flip permutation test of ``T = Σ w_i d_i`` (default ``w_i = 1/n``: the mean).

    Weights let one test cover an average over tasks: ``w_i = 1/(n_tasks · n_task(i))`` makes
    ``T`` the difference of the means of task means.
    """
    d = _as_array(diffs)
    w = np.full(d.size, 1.0 / max(d.size, 1)) if weights is None else _as_array(weights)
    if w.size != d.size:
        raise ValueError(f"{w.size} weights for {d.size} differences")
    terms = (w * d)[(w * d) != 0]
    observed = float((w * d).sum())
    if terms.size == 0:
        return PermutationResult(1.0, "no_difference", 0, observed)
    threshold = abs(float(terms.sum())) - 1e-9 * float(np.abs(terms).sum())  # float-rounding slack
    if terms.size <= exact_max_nonzero:
        half = terms.size // 2
        totals = _all_sign_sums(terms[:half])[:, None] + _all_sign_sums(terms[half:])[None, :]
        hits = int((np.abs(totals) >= threshold).sum())
        return PermutationResult(hits / float(2 ** terms.size), "exact", int(terms.size), observed)
    flips = sign_flips(seed, n_draws * terms.size).reshape(n_draws, terms.size)  # each flipped with chance 1/2
    total, hits = float(terms.sum()), 0
    for start in range(0, n_draws, _CHUNK):
        hits += int((np.abs(total - 2.0 * (flips[start:start + _CHUNK] @ terms)) >= threshold).sum())
    return PermutationResult((1 + hits) / (1 + n_draws), "monte_carlo", int(terms.size), observed)


def sign_flips(seed: int, count: int) -> np.ndarray:
    """The first ``count`` sign flips of the seed's stream: ``default_rng(seed).random(count) < 0.5``.

    Why a stream: ``Generator.random`` fills an array in C order from one sequence of doubles, so
    the draws of ``n`` patterns of ``m`` signs, taken chunk by chunk, are the stream's first
    ``n · m`` flips; every test with the same seed (each pair of a leaderboard) starts from the
    same stream, and drawing it was most of a test's time. Kept per seed up to
    :data:`FLIPS_KEPT` flips (more are drawn afresh), extended as longer tests ask."""
    if count > FLIPS_KEPT:
        return _draw_flips(np.random.default_rng(seed), count)
    with _FLIPS_LOCK:
        rng, kept = _FLIPS.get(seed) or (np.random.default_rng(seed), np.empty(0, dtype=bool))
        if kept.size < count:
            kept = np.concatenate([kept, _draw_flips(rng, min(max(count, 2 * kept.size), FLIPS_KEPT) - kept.size)])
            kept.setflags(write=False)
            _FLIPS[seed] = (rng, kept)
        return kept[:count]


def _draw_flips(rng: np.random.Generator, count: int) -> np.ndarray:
    flips = np.empty(count, dtype=bool)
    for start in range(0, count, _FLIP_BLOCK):  # bounded temporaries: a block of doubles at a time
        flips[start:start + _FLIP_BLOCK] = rng.random(min(_FLIP_BLOCK, count - start)) < 0.5
    return flips


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (None entries are not tested and stay None).

    With m tested p-values sorted ascending, ``p_(j)`` becomes ``max_{i ≤ j} min(1, (m − i + 1) p_(i))``:
    rejecting the adjusted values below α controls the family-wise error rate at α.
    """
    tested = [(p, i) for i, p in enumerate(p_values) if p is not None]
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    m = len(tested)
    for rank, (p, i) in enumerate(sorted(tested)):
        running = max(running, min(1.0, (m - rank) * float(p)))
        adjusted[i] = running
    return adjusted


def paired_comparison(values: Sequence[float] | np.ndarray, baseline: Sequence[float] | np.ndarray, *,
                      n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = SEED) -> dict[str, object]:
    """Delta, its paired-bootstrap 95% interval, the sign-flip p-value, the SD of the paired differences
    and the minimum detectable effect (None below 2 problems) of two aligned per-problem vectors."""
    a, b = _as_array(values), _as_array(baseline)
    if a.size != b.size:
        raise ValueError(f"paired values need the same problems: {a.size} vs {b.size}")
    diffs = a - b
    test = sign_flip_test(diffs, seed=seed)
    interval = paired_bootstrap_ci(diffs, n_resamples=n_resamples, seed=seed)
    return {"n_problems": int(a.size), "delta": float(diffs.mean()) if a.size else 0.0,
            "ci95": None if interval is None else [interval[0], interval[1]],
            "p_value": test.p_value, "test": test.method, "n_nonzero": test.n_nonzero,
            "diff_sd": float(np.std(diffs, ddof=1)) if a.size >= 2 else None, "mde": minimum_detectable_effect(diffs)}


def paired_sampling_interval(c_a: np.ndarray, c_b: np.ndarray, n_a: int | np.ndarray,
                             n_b: int | np.ndarray | None = None) -> tuple[float, float] | None:
    """Interval of the mean difference of Mean@k whose estimand is *these problems* (two checkpoints
    sampled independently on the same problems, counts ``c_a`` of ``n_a`` and ``c_b`` of ``n_b``):
    delta ± z·√(Var_A + Var_B), each :func:`pr1_eval.stats.variance.sampling_variance`. Where
    :func:`paired_bootstrap_ci` answers "better on problems like these", this answers "better on
    these problems"; ``bench/bench_coverage.py`` checks both on the real trajectories."""
    a, b = np.asarray(c_a, dtype=float), np.asarray(c_b, dtype=float)
    na = np.broadcast_to(np.asarray(n_a, dtype=float), a.shape)
    nb = na if n_b is None else np.broadcast_to(np.asarray(n_b, dtype=float), b.shape)
    if a.size < 1 or np.any(na < 2) or np.any(nb < 2):
        return None
    delta = float(np.mean(a / na - b / nb))
    half = NormalDist().inv_cdf(0.975) * float(np.sqrt(sampling_variance(a, na) + sampling_variance(b, nb)))
    return delta - half, delta + half
