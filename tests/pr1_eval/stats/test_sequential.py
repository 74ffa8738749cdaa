"""The adaptive stopping rule (:mod:`pr1_eval.stats.sequential`) against independent values.

The mixture martingale is checked against scipy's beta-binomial and binomial distributions, a bound
against the uniform prior's closed form, and the guarantee itself by simulation with a designed
truth: under continuous monitoring (a look after every sample, the hardest case for optional
stopping) the sequence excludes the true p at *some* look in at most alpha of the streams. The same
simulation shows a plain per-look 95 % interval failing that check, so the check can fail.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import betabinom, binom

from pr1_eval.errors import Pr1EvalError
from pr1_eval.stats.sequential import (
    StopRule,
    confidence_sequence,
    log_mixture,
    required_samples,
    settled,
    stopping_points,
)


def test_the_mixture_is_the_ratio_of_the_beta_binomial_to_the_binomial_likelihood() -> None:
    for n, c, p, a in [(10, 3, 0.2, 0.5), (16, 16, 0.9, 0.5), (8, 0, 0.3, 1.0), (64, 40, 0.55, 2.0)]:
        expected = math.log(betabinom.pmf(c, n, a, a) / binom.pmf(c, n, p))
        assert log_mixture(c, n, p, a) == pytest.approx(expected, rel=1e-9)


def test_the_bounds_meet_the_level_and_match_the_uniform_closed_form() -> None:
    low, high = confidence_sequence(np.array([0, 5, 12]), np.array([16, 12, 12]), 0.05, prior=1.0)
    assert low[0] == 0.0 and high[0] == pytest.approx(1 - (0.05 / 17) ** (1 / 16), abs=1e-12)
    assert high[2] == 1.0 and low[2] == pytest.approx((0.05 / 13) ** (1 / 12), abs=1e-12)
    for bound in (low[1], high[1]):  # inside (0, 1): exactly where the martingale reaches 1/alpha
        assert log_mixture(5, 12, bound, 1.0) == pytest.approx(math.log(20), abs=1e-9)
    assert low[1] < 5 / 12 < high[1]


def _streams(p: float, count: int, length: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((count, length)) < p


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.8, 0.97])
def test_coverage_holds_at_every_look_under_optional_stopping(p: float) -> None:
    alpha, count, length = 0.1, 2000, 64
    draws = _streams(p, count, length, seed=int(p * 1000))
    n = np.arange(1, length + 1)
    c = np.cumsum(draws, axis=1)
    excluded = log_mixture(c, n, p) >= math.log(1 / alpha)  # p outside the sequence at that look
    missed = excluded.any(axis=1).mean()
    assert missed <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / count)
    # the same streams with an ordinary 90 % interval at every look (Wald): stopping when it excludes p errs far more
    share = c / n
    wald = np.abs(share - p) > 1.645 * np.sqrt(np.maximum(share * (1 - share), 1e-12) / n)
    assert wald.any(axis=1).mean() > 2 * alpha


def test_settling_on_the_wrong_side_is_rarer_than_alpha_whatever_the_round() -> None:
    rule = StopRule(max_k=64, round_size=2, alpha=0.05, margin=0.5)
    for p, wrong_side in [(0.45, 1), (0.55, -1), (0.5, 1), (0.5, -1)]:
        draws = _streams(p, 4000, 64, seed=7)
        bounds = np.array(rule.boundaries())
        sides = settled(np.cumsum(draws, axis=1)[:, bounds - 1], bounds, rule)
        assert (sides == wrong_side).any(axis=1).mean() <= 0.05


def test_all_correct_settles_at_the_first_round_after_seven_samples() -> None:
    rule = StopRule(max_k=16, round_size=4)
    assert settled(7, 7, rule) == 1 and settled(6, 6, rule) == 0
    assert settled(0, 8, rule) == -1 and settled(7, 8, rule) == 0 and settled(4, 8, rule) == 0
    streams = np.array([[True] * 16, [False] * 16, [True, False] * 8, [True] * 7 + [False] + [True] * 8])
    assert stopping_points(streams, rule).tolist() == [8, 8, 16, 12]  # 11 of 12 settles at 12


def test_required_samples_replays_stopping_points_on_any_prefix() -> None:
    rule = StopRule(max_k=20, round_size=3, alpha=0.1, margin=0.3)
    draws = np.random.default_rng(3).random((300, 20)) < np.linspace(0, 1, 300)[:, None]
    stops = stopping_points(draws, rule)
    assert 20 in stops and stops.min() < 20  # both kinds occur, the boundaries include max_k
    for row, stop in zip(draws, stops, strict=True):
        assert required_samples(row, rule) == stop  # every verdict held
        assert required_samples(row[:stop], rule) == stop  # only what the run drew
        if stop > rule.round_size:
            assert required_samples(row[: stop - 1], rule) == 20  # a run cut short needs more


@pytest.mark.parametrize(("change", "word"), [({"alpha": 1.5}, "alpha"), ({"margin": 0.7}, "margin"),
                                              ({"round_size": 0}, "round-size")])
def test_bad_parameters_are_refused_in_one_line(change: dict[str, float], word: str) -> None:
    with pytest.raises(Pr1EvalError, match=word):
        StopRule(**{"max_k": 16, **change}).check()  # type: ignore[arg-type]
