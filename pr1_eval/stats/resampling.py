"""The resampled means behind every bootstrap interval (:func:`pr1_eval.stats.metrics.bootstrap_ci`).

A resample draws ``size`` positions with replacement from ``default_rng(seed)``; its mean is
``values[draws].mean(axis=1)``, numpy's pairwise sum of the drawn values divided by ``size``.
A leaderboard takes dozens of intervals over the same number of problems, and gathering
``n_resamples × size`` values for each was most of its time.

Why a second route can give the very same floats: most per-problem values are dyadic rationals
with a small denominator (c/16, 0/1, differences of c/16). When every value is ``m / 2**p`` with
integer ``m`` and ``size · max|m| ≤ 2**52``, every product ``count · value`` and every partial
sum of a resample is a multiple of ``2**-p`` below ``2**53 · 2**-p``: exactly representable, so
the sum is exact *whatever the order* of additions (pairwise, BLAS blocks, FMA). Then
``(counts @ values) / size``, with ``counts[r, j]`` how often resample ``r`` drew position ``j``,
equals the gathered mean bit for bit: one exact sum, one correctly rounded division. Values
outside that class (best@K's ``1 − (1 − c/n)^k``, a negative zero whose sign a sum could lose)
take the gather, unchanged.

And why several value vectors can share one product (:func:`resampled_means_of`): the sums of the
exact route are exact in any order, so ``(counts @ [v1 v2 …])[:, j]`` holds the very sums of
``counts @ vj``; one matrix product reads the 40 MB of counts once instead of once a vector (a
report's task takes five intervals over the same problems, the speedup's ratio two more).
Where ``size · max|m| ≤ 2**24`` (c/16 over 500 problems: 8,000) every value, product and partial
sum is exact in float32 as well, so the product is taken in float32 (:data:`SINGLE_BOUND`): half
the bytes of counts to read, about twice as fast, and the same sums, turned into float64 exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

#: Resamples drawn at a time, so memory stays bounded for large problem sets (MATH-500 × 10,000).
CHUNK = 1_000
#: Finest denominator of the exact route: values that are multiples of 2**-DYADIC_BITS.
DYADIC_BITS = 24
#: The float32 route's bound on ``size · max|m|``: float32 holds every integer up to 2**24.
SINGLE_BOUND = 2.0**24
#: Largest count matrix kept (float64, n_resamples × size): MATH-500 × 10,000 is 40 MB.
COUNTS_MAX_BYTES = 2**27


def resampled_means(values: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The mean of each of ``n_resamples`` resamples of the finite, flat ``values`` (size ≥ 1),
    bit-identical to :func:`gathered_means` (see the module docstring for why)."""
    return resampled_means_of([values], n_resamples, seed)[0]


def resampled_means_of(columns: Sequence[np.ndarray], n_resamples: int, seed: int) -> list[np.ndarray]:
    """:func:`resampled_means` of each of ``columns`` (finite, flat, size ≥ 1): the same floats,
    with the exact ones of one size taken from one product with the counts (see the module docstring)."""
    out: list[np.ndarray | None] = [None] * len(columns)
    groups: dict[tuple[int, str], list[int]] = {}  # (size, the product's float type) → columns
    for i, values in enumerate(columns):
        bound = exact_bound(values)
        if n_resamples > 0 and n_resamples * values.size * 8 <= COUNTS_MAX_BYTES and bound is not None \
                and bound <= 2.0**52:
            groups.setdefault((values.size, "float32" if bound <= SINGLE_BOUND else "float64"), []).append(i)
        else:
            out[i] = gathered_means(values, n_resamples, seed)
    for (size, dtype), at in groups.items():
        stacked = np.column_stack([columns[i] for i in at]).astype(dtype)  # exact: see the module docstring
        sums = (resample_counts(size, n_resamples, seed, dtype) @ stacked).astype(np.float64)
        for j, i in enumerate(at):
            out[i] = sums[:, j] / size
    return [means for means in out if means is not None]


def gathered_means(values: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The resampled means by gathering each resample's values: right for any values."""
    means = np.empty(n_resamples)
    for start, draws in zip(range(0, n_resamples, CHUNK), resample_draws(values.size, n_resamples, seed), strict=True):
        means[start:start + len(draws)] = values[draws].mean(axis=1)
    return means


def exact_sums(values: np.ndarray) -> bool:
    """Whether any sum of ``values.size`` draws from ``values`` is exact in float64 in any order:
    every value ``m · 2**-p`` with integer ``m`` for some ``p ≤ DYADIC_BITS`` and
    ``size · max|m| ≤ 2**52`` (a margin below 2**53), and no negative zero (whose sign a sum can lose)."""
    bound = exact_bound(values)
    return bound is not None and bound <= 2.0**52


def exact_bound(values: np.ndarray) -> float | None:
    """``size · max|m|`` for values ``m · 2**-p`` (the least such ``p ≤ DYADIC_BITS``): a bound on
    every partial sum of a resample, in units of ``2**-p``; None for other values or a negative zero."""
    if values.size == 0 or bool(np.any((values == 0) & np.signbit(values))):
        return None
    for p in range(DYADIC_BITS + 1):
        scaled = values * float(2**p)  # a power of two: exact (an overflow to inf fails the bound)
        if np.array_equal(scaled, np.floor(scaled)):
            return float(np.abs(scaled).max()) * values.size
    return None


@lru_cache(maxsize=4)
def resample_draws(size: int, n_resamples: int, seed: int) -> tuple[np.ndarray, ...]:
    """The positions every resample draws, chunk by chunk, as ``default_rng(seed)`` gives them.

    Why kept: they depend only on the number of problems, the resamples and the seed, so every
    interval over the same number of problems (each metric of each run of a leaderboard) draws the
    same positions, and drawing them was most of an interval's time. int32 holds any position."""
    rng = np.random.default_rng(seed)
    chunks = []
    for start in range(0, n_resamples, CHUNK):
        draws = rng.integers(0, size, size=(min(start + CHUNK, n_resamples) - start, size))
        chunks.append(draws.astype(np.int32) if size < 2**31 else draws)
        chunks[-1].setflags(write=False)
    return tuple(chunks)


@lru_cache(maxsize=4)
def resample_counts(size: int, n_resamples: int, seed: int, dtype: str = "float64") -> np.ndarray:
    """``counts[r, j]``: how often resample ``r`` of :func:`resample_draws` drew position ``j``
    (float64, or float32 for the single-precision route, so ``counts @ values`` is one matrix-vector
    product; whole numbers up to ``size``, exact in either). Kept for the same reason as the draws."""
    counts = np.empty((n_resamples, size), dtype=dtype)
    for start, draws in zip(range(0, n_resamples, CHUNK), resample_draws(size, n_resamples, seed), strict=True):
        rows = len(draws)
        flat = (draws + (np.arange(rows, dtype=np.int64) * size)[:, None]).ravel()
        counts[start:start + rows] = np.bincount(flat, minlength=rows * size).reshape(rows, size)
    counts.setflags(write=False)
    return counts
