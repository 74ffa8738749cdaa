"""The nano RL stages' learning verdict and parallel ratio: the trained model against the frozen start model
(Mantel–Haenszel)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from repro.nano.gain import PER_PROBLEM, PROBLEMS, Z_GAIN, Z_HOLD, gain_check, mantel_haenszel_z, parallel_holds_check


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


def _each_problem(hits: int) -> np.ndarray:
    """16 problems × 16 samples with ``hits`` ones in every problem."""
    out = np.zeros((PROBLEMS, PER_PROBLEM))
    out[:, :hits] = 1
    return out


def test_the_parallel_ratio_against_its_start_by_hand() -> None:
    """Every problem alike, n = 16: variance per problem n²·T(2n − T)/((2n)²(2n − 1)) = T(32 − T)/124."""
    start = _each_problem(15)  # 0.94, saturated
    # trained 16 of 16: T = 31, excess 0.5, variance 31/124 = 1/4 a problem: z = 8 / √4 = 4.0 (a rise passes)
    rose = parallel_holds_check("seen-gsm8k", start, _each_problem(16))
    assert rose.passed and rose.name == "parallel ratio holds (against its start)" and "z = 4.0 " in rose.figures
    # trained 13 of 16 (0.81): T = 28, excess −1, variance 28·4/124: z = −16 / √(16·112/124) = −4.21 > −4.5: passes
    assert mantel_haenszel_z(start, _each_problem(13)) == pytest.approx(-16 / math.sqrt(16 * 112 / 124))
    assert parallel_holds_check("seen-gsm8k", start, _each_problem(13)).passed
    # trained 12 of 16 (0.75): T = 27, excess −1.5, variance 27·5/124: z = −24 / √(16·135/124) = −5.75: a collapse
    collapse = parallel_holds_check("seen-gsm8k", start, _each_problem(12))
    assert mantel_haenszel_z(start, _each_problem(12)) == pytest.approx(-24 / math.sqrt(16 * 135 / 124))
    assert not collapse.passed and "start model 0.938, trained 0.750" in collapse.figures
    same = parallel_holds_check("seen-gsm8k", _each_problem(16), _each_problem(16))
    assert same.passed and "z = 0.0 " in same.figures  # both always branch: nothing to compare


def test_a_frozen_policys_parallel_ratio_gives_a_standard_normal_z_and_a_collapse_fails() -> None:
    """Block shares where the tiny models start (0.9-0.99): two samplings of one model give z ≈ N(0, 1)
    (4,000 replicates: SE of the mean 0.016, of the SD ~0.011), within 1.5 of the bar in ~0.13 % (asserted
    < 0.5 %: ~6 SE); a collapse 0.97 → 0.80 gives z ≈ −6.0 and fails in ~97 % (asserted > 90 %: ~12 SE)."""
    rng = np.random.default_rng(21)
    p = rng.uniform(0.9, 0.99, PROBLEMS)
    z = _draws(rng, p, p, 4_000)
    assert abs(z.mean()) < 0.07 and abs(z.std() - 1) < 0.06
    assert (z <= -(Z_HOLD - 1.5)).mean() < 0.005
    collapse = _draws(rng, np.full(PROBLEMS, 0.97), np.full(PROBLEMS, 0.80), 1_000)
    assert -6.5 < collapse.mean() < -5.5 and (collapse <= -Z_HOLD).mean() > 0.9
