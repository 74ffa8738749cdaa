"""Resampled means: the exact-count route gives the very floats of gathering each resample."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pr1_eval.stats import resampling
from pr1_eval.stats.metrics import bootstrap_ci
from pr1_eval.stats.resampling import exact_sums, gathered_means, resample_counts, resampled_means


def reference_means(values: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """Written out independently: chunks of 1,000 resamples from ``default_rng(seed).integers``, each
    resample's mean by numpy over the gathered values."""
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, n_resamples, 1000):
        draws = rng.integers(0, values.size, size=(min(start + 1000, n_resamples) - start, values.size))
        out.append(values[draws].mean(axis=1))
    return np.concatenate(out)


def reference_ci(values: np.ndarray, n_resamples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    n = values.size  # the expanded percentile tail, from its definition (Hesterberg 2015)
    tail = float(stats.norm.cdf(-math.sqrt(n / (n - 1)) * stats.t.ppf(0.975, n - 1)))
    low, high = np.quantile(reference_means(values, n_resamples, seed), [tail, 1 - tail])
    return float(low), float(high)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a.view(np.int64), b.view(np.int64)))


def dyadic_cases() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    return [
        ("c/16", rng.integers(0, 17, 500) / 16),
        ("0/1", rng.integers(0, 2, 30).astype(float)),
        ("differences of c/16", (rng.integers(0, 17, 40) - rng.integers(0, 17, 40)) / 16),
        ("all zero", np.zeros(25)),
        ("all one", np.ones(64)),
        ("two problems", np.array([0.0, 1.0])),
        ("finest denominator", rng.integers(-2**24, 2**24, 77) / 2**24),
        ("large integers", rng.integers(-2**30, 2**30, 301).astype(float)),
        ("mixed powers", np.array([0.5, 0.25, -0.125, 3.0, 2.0**-20, -7.75, 1024.0])),
        ("one nonzero", np.array([0.0] * 99 + [-0.0625])),
    ]


@pytest.mark.parametrize(("label", "values"), dyadic_cases(), ids=[label for label, _ in dyadic_cases()])
@pytest.mark.parametrize(("n_resamples", "seed"), [(10_000, 0), (2_500, 3), (1, 11)])
def test_dyadic_values_take_the_exact_route_bit_for_bit(label: str, values: np.ndarray, n_resamples: int,
                                                        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    assert exact_sums(values), label
    monkeypatch.setattr(resampling, "gathered_means", _refuse)  # the exact route must not fall back
    assert same_bits(resampled_means(values, n_resamples, seed), reference_means(values, n_resamples, seed))


def test_random_dyadic_values_match_the_gather_bit_for_bit() -> None:
    rng = np.random.default_rng(2026)
    for _ in range(40):
        size, bits = int(rng.integers(2, 700)), int(rng.integers(0, 25))
        values = rng.integers(-(2**bits), 2**bits + 1, size) / 2.0**bits
        assert exact_sums(values)
        assert same_bits(resampled_means(values, 1_500, 5), gathered_means(values, 1_500, 5))


@pytest.mark.parametrize(("label", "values"), [
    ("best@16 of c/16", 1 - (1 - np.random.default_rng(1).integers(0, 17, 300) / 16) ** 16),
    ("thirds", np.array([1 / 3, 2 / 3, 0.0, 1.0] * 10)),
    ("one bit too fine", np.array([0.0, 2.0**-25, 0.5])),
    ("negative zero", np.array([-0.0, -0.0, 0.0])),
    ("past the exact bound", np.array([2.0**52, 1.0, 3.0])),
    ("a c/5 value", np.array([0.2, 0.4, 0.6, 0.8])),
])
def test_other_values_take_the_gather(label: str, values: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not exact_sums(values), label
    monkeypatch.setattr(resampling, "resample_counts", _refuse)
    assert same_bits(resampled_means(values, 3_000, 0), reference_means(values, 3_000, 0))


def test_negative_zeros_give_the_gathers_zero() -> None:
    values = np.array([-0.0, -0.0, -0.0])
    assert same_bits(resampled_means(values, 10, 0), reference_means(values, 10, 0))


def test_counts_are_how_often_each_resample_drew_each_position() -> None:
    size, n_resamples = 13, 2_345
    counts = resample_counts(size, n_resamples, 4)
    rng = np.random.default_rng(4)
    draws = np.concatenate([rng.integers(0, size, size=(min(s + 1000, n_resamples) - s, size))
                            for s in range(0, n_resamples, 1000)])
    expected = np.array([np.bincount(row, minlength=size) for row in draws], dtype=float)
    assert np.array_equal(counts, expected) and np.all(counts.sum(axis=1) == size)
    assert not counts.flags.writeable


def test_a_count_matrix_over_the_memory_bound_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    values = np.random.default_rng(3).integers(0, 17, 50) / 16
    monkeypatch.setattr(resampling, "COUNTS_MAX_BYTES", 50 * 8 * 999)
    monkeypatch.setattr(resampling, "resample_counts", _refuse)
    assert same_bits(resampled_means(values, 1_000, 0), reference_means(values, 1_000, 0))


@pytest.mark.parametrize("values", [np.random.default_rng(5).integers(0, 17, 500) / 16,
                                    1 - (1 - np.random.default_rng(6).integers(0, 17, 500) / 16) ** 16,
                                    np.random.default_rng(8).integers(0, 2, 30).astype(float)])
def test_bootstrap_ci_is_the_written_out_interval(values: np.ndarray) -> None:
    assert bootstrap_ci(values) == reference_ci(values)


def _refuse(*args: object) -> np.ndarray:
    raise AssertionError("this route must not be taken")


def test_means_of_several_columns_are_each_columns_own_bit_for_bit() -> None:
    """One product for the exact columns of each size (a report task's five intervals, the speedup's two)
    gives each column the floats of gathering its own resamples; the others still gather, in place."""
    rng = np.random.default_rng(57)
    columns = [rng.integers(0, 17, 300) / 16, 1 - (1 - rng.integers(0, 17, 300) / 16) ** 16,
               (rng.integers(0, 17, 300) - rng.integers(0, 17, 300)) / 16, rng.integers(0, 9000, 300).astype(float),
               rng.integers(0, 2, 41).astype(float), np.array([1 / 3, 2 / 3, 0.0]), rng.integers(0, 17, 41) / 16]
    together = resampling.resampled_means_of(columns, 2_000, 9)
    assert len(together) == len(columns)
    for values, means in zip(columns, together, strict=True):
        assert same_bits(means, reference_means(values, 2_000, 9))


def test_intervals_of_several_columns_are_each_columns_own() -> None:
    from pr1_eval.stats.metrics import bootstrap_cis

    rng = np.random.default_rng(58)
    columns = [rng.integers(0, 17, 120) / 16, 1 - (1 - rng.integers(0, 17, 120) / 16) ** 16, np.array([0.5]),
               rng.integers(0, 2, 30).astype(float)]
    assert bootstrap_cis(columns) == [bootstrap_ci(values) for values in columns]
    assert bootstrap_cis(columns)[2] is None
    assert bootstrap_cis(columns[:1])[0] == reference_ci(columns[0])


def test_values_whose_sums_fit_float32_take_the_single_precision_product(monkeypatch: pytest.MonkeyPatch) -> None:
    """c/16 over 500 problems (size · max|m| = 8,000 ≤ 2**24) takes the float32 counts, large integers
    the float64 ones; both give the gather's floats."""
    asked: list[str] = []
    real = resampling.resample_counts

    def spy(size: int, n_resamples: int, seed: int, dtype: str = "float64") -> np.ndarray:
        asked.append(dtype)
        return real(size, n_resamples, seed, dtype)

    monkeypatch.setattr(resampling, "resample_counts", spy)
    rng = np.random.default_rng(24)
    small, large = rng.integers(0, 17, 500) / 16, rng.integers(0, 2**25, 500).astype(float)
    assert resampling.exact_bound(small) == 16.0 * 500 and resampling.exact_bound(large) > resampling.SINGLE_BOUND
    for values, dtype in [(small, "float32"), (large, "float64")]:
        asked.clear()
        assert same_bits(resampled_means(values, 3_000, 2), reference_means(values, 3_000, 2))
        assert asked == [dtype]
