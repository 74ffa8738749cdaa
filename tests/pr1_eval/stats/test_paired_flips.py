"""The Monte Carlo sign-flip test from the kept stream of flips: the p-values of drawing afresh."""

from __future__ import annotations

import numpy as np
import pytest

from pr1_eval.stats import paired
from pr1_eval.stats.paired import sign_flip_test, sign_flips


def fresh_p(diffs: np.ndarray, weights: np.ndarray | None = None, n_draws: int = 10_000, seed: int = 0) -> float:
    """Written out: chunks of 1,000 patterns, each drawn afresh from ``default_rng(seed)``."""
    w = np.full(diffs.size, 1.0 / diffs.size) if weights is None else weights
    terms = (w * diffs)[(w * diffs) != 0]
    threshold = abs(float(terms.sum())) - 1e-9 * float(np.abs(terms).sum())
    rng, hits = np.random.default_rng(seed), 0
    for start in range(0, n_draws, 1000):
        flipped = rng.random((min(1000, n_draws - start), terms.size)) < 0.5
        hits += int((np.abs(float(terms.sum()) - 2.0 * (flipped @ terms)) >= threshold).sum())
    return (1 + hits) / (1 + n_draws)


def test_the_kept_stream_is_the_generators_stream() -> None:
    paired._FLIPS.clear()
    short, longer = sign_flips(3, 1_000).copy(), sign_flips(3, 123_457)
    expected = np.random.default_rng(3).random(123_457) < 0.5
    assert np.array_equal(longer, expected) and np.array_equal(short, expected[:1_000])
    assert not longer.flags.writeable


@pytest.mark.parametrize("seed", range(5))
def test_monte_carlo_p_is_the_fresh_draws_p(seed: int) -> None:
    rng = np.random.default_rng(seed)
    paired._FLIPS.clear()
    for size in (45, 60, 500, 64, 499, 1000):  # out of order: the kept stream grows and is reused
        a, b = rng.integers(0, 17, size) / 16, rng.integers(0, 17, size) / 16
        b[: size // 3] = a[: size // 3] + 1 / 16 * (seed % 2)  # a shift that makes some p-values small
        diffs = a - b
        result = sign_flip_test(diffs)
        assert result.method == "monte_carlo"
        assert result.p_value == fresh_p(diffs), size


def test_weighted_and_odd_draws_and_other_seeds_match() -> None:
    rng = np.random.default_rng(9)
    diffs = (rng.integers(0, 17, 300) - rng.integers(0, 17, 300)) / 16
    weights = np.r_[np.full(100, 1 / 200), np.full(200, 1 / 400)]
    for n_draws, seed in ((10_000, 0), (2_345, 0), (777, 5)):
        assert sign_flip_test(diffs, weights, n_draws=n_draws, seed=seed).p_value == fresh_p(diffs, weights, n_draws,
                                                                                             seed)


def test_beyond_the_kept_flips_they_are_drawn_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paired, "FLIPS_KEPT", 1_000)
    paired._FLIPS.clear()
    diffs = (np.random.default_rng(2).integers(0, 17, 50) - 8) / 16
    assert sign_flip_test(diffs, n_draws=3_000).p_value == fresh_p(diffs, n_draws=3_000)
    assert paired._FLIPS == {}
