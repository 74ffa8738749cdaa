"""Spearman's ρ and its t-approximation p-value computed here are scipy's ``spearmanr`` to the last
bit (``==``), and the average ranks are ``rankdata``'s, on series with ties, constants, NaN,
perfect trends and every length from 0 to 40 — so no drift table moves when scipy.stats is not
imported."""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pytest
from scipy.stats import rankdata, spearmanr

from pr1_eval.stats.spearman import average_ranks, spearman_r, spearman_test


def _series(rng: random.Random, n: int) -> np.ndarray:
    kind = rng.choice(["float", "ties", "steps", "constant", "nan", "trend"])
    if kind == "float":
        return np.array([rng.gauss(0, 1) for _ in range(n)])
    if kind == "ties":
        return np.array([float(rng.randint(0, 3)) for _ in range(n)])
    if kind == "steps":
        return np.array([100.0 * (i + 1) for i in range(n)])
    if kind == "constant":
        return np.full(n, 0.25)
    if kind == "trend":
        return np.array([0.1 * i + rng.choice([0.0, 1e-12]) for i in range(n)])
    values = np.array([rng.random() for _ in range(n)])
    if n:
        values[rng.randrange(n)] = math.nan
    return values


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_rho_and_p_equal_scipy_bit_for_bit() -> None:
    rng = random.Random(11)
    checked = 0
    for _ in range(3000):
        n = rng.choice([0, 1, 2, 3, 5, 8, 9, 12, 20, 40])
        x, y = _series(rng, n), _series(rng, n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = spearmanr(x, y)
        rho, p = spearman_r(x, y)
        assert _same(rho, float(want.statistic)) and _same(p, float(want.pvalue)), (x.tolist(), y.tolist())
        checked += not math.isnan(rho)
    assert checked > 1000, "most series have a defined rho"


@pytest.mark.parametrize("n", [1, 2, 7, 30])
def test_average_ranks_equal_rankdata(n: int) -> None:
    rng = random.Random(n)
    for _ in range(200):
        values = _series(rng, n)
        assert np.array_equal(average_ranks(values), rankdata(values), equal_nan=True)


def test_a_perfect_trend_over_twelve_steps_has_scipy_t_p() -> None:
    """ρ = 1 sends the t statistic to infinity (a division by zero scipy silences) and p to 0."""
    steps = list(range(12))
    assert spearman_test(steps, [2.0 * s for s in steps]) == {"spearman_rho": 1.0, "p_value": 0.0,
                                                             "p_method": "t-approximation (n = 12)"}
    assert spearman_test(steps, [1.0] * 12) == {"spearman_rho": None, "p_value": None, "p_method": None}
