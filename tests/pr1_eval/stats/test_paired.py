"""Paired statistics against hand-worked cases and second, brute-force implementations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from pr1_eval.stats.paired import (
    EXACT_MAX_NONZERO,
    holm,
    paired_bootstrap_ci,
    paired_comparison,
    paired_sampling_interval,
    sign_flip_test,
)


def brute_force_p(diffs: list[float], weights: list[float] | None = None) -> float:
    """Every sign pattern over *all* problems (zeros included), by itertools: the definition."""
    w = weights or [1 / len(diffs)] * len(diffs)
    observed = abs(sum(wi * d for wi, d in zip(w, diffs, strict=True)))
    hits = total = 0
    for signs in itertools.product((1, -1), repeat=len(diffs)):
        total += 1
        value = abs(sum(s * wi * d for s, wi, d in zip(signs, w, diffs, strict=True)))
        hits += value >= observed - 1e-12
    return hits / total


def test_identical_runs_give_delta_zero_p_one_and_a_zero_interval() -> None:
    values = [0.0, 0.25, 1.0, 0.5, 0.75]
    result = paired_comparison(values, values)
    assert result["delta"] == 0.0 and result["p_value"] == 1.0 and result["ci95"] == [0.0, 0.0]
    assert result["test"] == "no_difference"


@pytest.mark.parametrize("n", [1, 5, 12, EXACT_MAX_NONZERO])
def test_right_everywhere_against_wrong_everywhere_gives_the_smallest_exact_p(n: int) -> None:
    result = sign_flip_test([1.0] * n)
    assert result.method == "exact"
    assert result.p_value == 2 / 2**n  # only "all +" and "all −" are as extreme


def test_beyond_twenty_nonzero_differences_monte_carlo_with_the_plus_one_rule() -> None:
    result = sign_flip_test([1.0] * (EXACT_MAX_NONZERO + 1))
    assert result.method == "monte_carlo"
    # 10,000 draws essentially never hit one of the 2 extreme patterns of 2^21
    assert result.p_value == pytest.approx(1 / 10_001)
    assert sign_flip_test([1.0] * 30).p_value == sign_flip_test([1.0] * 30).p_value  # fixed seed


def test_zeros_do_not_count_towards_the_exact_limit() -> None:
    diffs = [0.0] * 30 + [1.0] * 3
    result = sign_flip_test(diffs)
    assert (result.method, result.n_nonzero, result.p_value) == ("exact", 3, 2 / 8)


@pytest.mark.parametrize("seed", range(6))
def test_exact_p_matches_brute_force_enumeration(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 11))
    # per-problem mean@4 differences: multiples of 1/4, with zeros and ties
    diffs = list((rng.integers(0, 5, n) - rng.integers(0, 5, n)) / 4)
    assert sign_flip_test(diffs).p_value == pytest.approx(brute_force_p(diffs), abs=1e-12)
    weights = list(rng.uniform(0.1, 1.0, n))
    assert sign_flip_test(diffs, weights).p_value == pytest.approx(brute_force_p(diffs, weights), abs=1e-12)


def test_hand_worked_small_case() -> None:
    # d = (1, 1, -1), observed |sum| = 1; sums over (±1, ±1, ±1) are ±3 (2 patterns) and ±1 (6 patterns):
    # every pattern is at least as extreme -> p = 1
    assert sign_flip_test([1.0, 1.0, -1.0]).p_value == 1.0
    # d = (1, 1, 0.5), observed |sum| = 2.5; the other patterns give ±1.5 and ±0.5 -> only the 2 extreme ones -> 2/8
    assert sign_flip_test([1.0, 1.0, 0.5]).p_value == pytest.approx(2 / 8)


def test_monte_carlo_agrees_with_exact_within_sampling_error() -> None:
    rng = np.random.default_rng(7)
    diffs = list(rng.choice([-0.5, -0.25, 0.25, 0.5, 0.75], size=18))
    exact = sign_flip_test(diffs).p_value
    mc = sign_flip_test(diffs, exact_max_nonzero=5).p_value
    assert abs(mc - exact) < 4 * np.sqrt(exact * (1 - exact) / 10_000) + 1e-4


def test_bootstrap_interval_hand_worked() -> None:
    # two problems with differences 0 and 1: resampled means are 0, 0.5, 1 with chance 1/4, 1/2, 1/4
    assert paired_bootstrap_ci([0.0, 1.0]) == (0.0, 1.0)
    assert paired_bootstrap_ci([0.3] * 7) == pytest.approx((0.3, 0.3))
    assert paired_bootstrap_ci([0.5]) is None


def test_bootstrap_interval_matches_scipy() -> None:
    rng = np.random.default_rng(3)
    diffs = rng.choice([-1, -0.5, 0, 0.5, 1], size=40, p=[0.1, 0.15, 0.4, 0.2, 0.15])
    ours = paired_bootstrap_ci(diffs)
    tail = stats.norm.cdf(-np.sqrt(40 / 39) * stats.t.ppf(0.975, 39))  # the expanded percentile tail (Hesterberg)
    ref = stats.bootstrap((diffs,), np.mean, n_resamples=10_000, method="percentile", random_state=11,
                          confidence_level=1 - 2 * tail).confidence_interval
    assert ours is not None
    assert ours[0] == pytest.approx(ref.low, abs=0.02) and ours[1] == pytest.approx(ref.high, abs=0.02)
    assert paired_bootstrap_ci(diffs) == ours  # fixed seed


def test_holm_hand_worked() -> None:
    # sorted 0.01, 0.03, 0.04 -> 3*0.01=0.03, max(0.03, 2*0.03)=0.06, max(0.06, 1*0.04)=0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.6]) == [1.0, 1.0]
    assert holm([0.2, None]) == [0.2, None]
    assert holm([]) == []


def _holm_rejects(p: list[float], alpha: float) -> list[bool]:
    """Holm's procedure as a decision rule: reject in ascending order while p_(j) <= alpha/(m-j)."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    rejected = [False] * len(p)
    for j, i in enumerate(order):
        if p[i] > alpha / (len(p) - j):
            break
        rejected[i] = True
    return rejected


@pytest.mark.parametrize("seed", range(5))
def test_holm_adjusted_p_is_below_alpha_exactly_when_the_procedure_rejects(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = list(rng.uniform(0, 0.1, int(rng.integers(2, 7))))
    adjusted = holm(p)
    for alpha in np.linspace(0.001, 0.2, 80):
        assert [a is not None and a <= alpha for a in adjusted] == _holm_rejects(p, alpha)


def test_paired_comparison_delta_and_bad_input() -> None:
    result = paired_comparison([1.0, 0.5, 0.25], [0.5, 0.5, 0.0])
    assert result["delta"] == pytest.approx(0.25) and result["n_problems"] == 3
    with pytest.raises(ValueError, match="same problems"):
        paired_comparison([1.0], [1.0, 0.0])


def test_the_these_problems_interval_of_a_difference_by_hand_and_by_simulation() -> None:
    """A: 1 and 2 of 4 right, B: 0 and 4 of 4: delta = (1/4 + (2/4 − 1))/2 = −1/8; Var_A =
    ((3/16)/3 + (1/4)/3)/2² = 7/192, Var_B = 0 (all-or-nothing problems). Then its coverage of the
    fixed problems' true gap over 2,000 simulated pairs of independent runs (30 problems, 16 samples)."""
    low, high = paired_sampling_interval(np.array([1, 2]), np.array([0, 4]), 4) or (0.0, 0.0)
    assert (low + high) / 2 == pytest.approx(-0.125)
    assert (high - low) / 2 == pytest.approx(stats.norm.ppf(0.975) * np.sqrt(7 / 192))
    assert paired_sampling_interval(np.array([1]), np.array([1]), 1) is None  # one sample: no variance estimate
    rng = np.random.default_rng(9)
    p_a, p_b = rng.beta(0.7, 1.0, 30), rng.beta(0.7, 1.0, 30)
    hits = 0
    for _ in range(2000):
        interval = paired_sampling_interval(rng.binomial(16, p_a), rng.binomial(16, p_b), 16)
        assert interval is not None
        hits += interval[0] <= float(np.mean(p_a - p_b)) <= interval[1]
    assert 0.93 <= hits / 2000 <= 0.975
