"""The nano RL stages' learning verdict: the trained model against the frozen start model (Mantel–Haenszel)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from repro.nano.gain import PER_PROBLEM, PROBLEMS, Z_GAIN, gain_check, mantel_haenszel_z


def test_the_statistic_by_hand() -> None:
    # problem 1: start 0/2, trained 2/2 (T = 2: excess 1, variance 4·2·2/(16·3) = 1/3);
    # problem 2: start 1/2, trained 2/2 (T = 3: excess 0.5, variance 4·3·1/(16·3) = 1/4)
    start, trained = [[0, 0], [1, 0]], [[1, 1], [1, 1]]
    assert mantel_haenszel_z(start, trained) == pytest.approx(1.5 / math.sqrt(1 / 3 + 1 / 4))
    assert mantel_haenszel_z(trained, start) == pytest.approx(-1.5 / math.sqrt(1 / 3 + 1 / 4))
    assert mantel_haenszel_z([[1, 1]], [[1, 1]]) == 0.0  # no problem with both outcomes: nothing to compare
    with pytest.raises(ValueError, match="one shape"):
        mantel_haenszel_z([[1, 0]], [[1, 0, 1]])


def _draws(rng: np.random.Generator, p_start: np.ndarray, p_trained: np.ndarray, runs: int) -> np.ndarray:
    shape = (runs, PROBLEMS, PER_PROBLEM)
    start = rng.random(shape) < p_start[None, :, None]
    trained = rng.random(shape) < p_trained[None, :, None]
    return np.array([mantel_haenszel_z(s, t) for s, t in zip(start, trained, strict=True)])


def test_a_frozen_stage_gives_a_standard_normal_z_even_where_the_reward_is_rare() -> None:
    """Learning rate 0: two samplings of one model. Chances near 0 (the tiny models start at 3-15 %), where a
    paired z with per-problem variances is too wide; 4,000 replicates: SE of the mean 0.016, of the SD ~0.011."""
    rng = np.random.default_rng(11)
    p = rng.uniform(0.0, 0.2, PROBLEMS)
    z = _draws(rng, p, p, 4_000)
    assert abs(z.mean()) < 0.07 and abs(z.std() - 1) < 0.06
    assert (z >= Z_GAIN - 1.5).mean() < 0.003  # a frozen stage stays 1.5 below the bar


def test_a_learning_stage_clears_the_bar_by_a_margin() -> None:
    """A rise like the smallest measured on the draws (0.16 → 0.72 on the Seen stage) clears Z_GAIN + 1.5."""
    rng = np.random.default_rng(12)
    z = _draws(rng, rng.uniform(0.05, 0.3, PROBLEMS), rng.uniform(0.5, 0.9, PROBLEMS), 1_000)
    assert (z >= Z_GAIN + 1.5).mean() > 0.99


def test_the_check_reads_its_verdict_off_the_bar() -> None:
    start, trained = np.zeros((PROBLEMS, PER_PROBLEM)), np.ones((PROBLEMS, PER_PROBLEM))
    trained[:, 0] = 0  # 11 of 12 in each problem, against none
    check = gain_check("seen-gsm8k", start, trained)
    assert check.passed and check.name == "beats its start" and "z = " in check.figures
    assert not gain_check("seen-gsm8k", trained, start).passed
    reported = gain_check("seen-gsm8k", trained, start, required=False)
    assert reported.passed and "reported" in reported.name
