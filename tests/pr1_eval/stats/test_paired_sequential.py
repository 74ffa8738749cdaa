"""The paired confidence sequence: valid under optional stopping whatever the per-problem gaps, computed as written."""

from __future__ import annotations

import math

import numpy as np

from pr1_eval.stats import paired_sequential as ps

ALPHA = 0.05


def _draw(rng: np.random.Generator, pa: np.ndarray, pb: np.ndarray, reps: int, n: int) -> np.ndarray:
    a = rng.random((reps, pa.size, n)) < pa[:, None]
    b = rng.random((reps, pb.size, n)) < pb[:, None]
    return a.astype(float) - b


def test_coverage_at_every_look_with_gaps_that_differ_by_problem() -> None:
    """The CS must hold at all 48 looks at once (optional stopping), also when the per-problem gaps
    δ_i are far from their mean (the case a common-mean betting CS would get wrong)."""
    rng = np.random.default_rng(1)
    pa = np.tile([0.9, 0.1, 0.5, 0.7], 5)
    pb = np.tile([0.3, 0.6, 0.5, 0.4], 5)  # δ_i = +0.6, −0.5, 0, +0.3: mean 0.1
    truth = float((pa - pb).mean())
    low, high = ps.confidence_sequence(ps.evidence(_draw(rng, pa, pb, 1500, 48)), ALPHA)
    miss = ((low > truth) | (high < truth)).any(axis=-1).mean()
    assert miss <= ALPHA  # 1,500 replicates: the MC error of a 5 % rate is 0.6 points
    assert (low[:, -1] < truth).mean() > 0.9 and (high[:, -1] > truth).mean() > 0.9


def test_a_true_null_of_mixed_signs_rarely_yields_a_sign() -> None:
    """Δ = 0 exactly, while half the problems favour A by 0.4 and half favour B: the running-minimum
    p-value (the sweep's) rejects in at most α of replicates."""
    rng = np.random.default_rng(2)
    pa = np.array([0.8, 0.2] * 10)
    pb = np.array([0.4, 0.6] * 10)
    ev = ps.evidence(_draw(rng, pa, pb, 2000, 64))
    running = np.minimum.accumulate(np.minimum(ps.one_sided_p(ev, 0.0, +1), ps.one_sided_p(ev, 0.0, -1)), axis=-1)
    assert (2 * running[:, -1] <= ALPHA).mean() <= ALPHA


def test_the_evidence_equals_a_direct_sum_over_pairs() -> None:
    """A second method: log M written out pair by pair with plain Python, for one κ."""
    rng = np.random.default_rng(3)
    d = (rng.random((3, 5)) < 0.6).astype(float) - (rng.random((3, 5)) < 0.3)
    ev = ps.evidence(d)
    kappa, m = ps.KAPPAS[5], 0.1
    expected = 0.0
    for i in range(3):
        for j in range(5):
            guess = sum(d[i, :j]) / (j + 1)
            centre = min(guess, 0.95 / kappa - 1)
            c = 1 + centre
            psi = -math.log(1 - kappa * c) - kappa * c
            expected += kappa * (d[i, j] - m) - psi * (d[i, j] - centre) ** 2 / c ** 2
    got = kappa * (ev.total[-1] - ev.pairs[-1] * m) - ev.penalty[-1, 0, 5]
    assert math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-9)
    assert ev.pairs[-1] == 15


def test_a_large_gap_decides_early_and_a_small_one_later() -> None:
    rng = np.random.default_rng(4)
    pb = rng.uniform(0.2, 0.6, 30)
    wide = ps.verdicts(ps.evidence(_draw(rng, np.minimum(pb + 0.4, 1), pb, 200, 16)), ALPHA, 0.05)
    narrow = ps.verdicts(ps.evidence(_draw(rng, pb + 0.08, pb, 200, 16)), ALPHA, 0.05)
    assert wide.above[:, 3].mean() > 0.95  # 40 points: 4 samples per problem
    assert narrow.above[:, 3].mean() < 0.05 and not narrow.below.any()
    assert (wide.above | wide.below).sum() == wide.above.sum()  # never the wrong sign here


def test_within_is_certified_for_identical_checkpoints_given_enough_samples() -> None:
    rng = np.random.default_rng(5)
    p = rng.uniform(0, 1, 30)
    v = ps.verdicts(ps.evidence(_draw(rng, p, p, 100, 64)), ALPHA, 0.1)
    assert v.within[:, -1].mean() > 0.9 and not (v.above | v.below).any(axis=-1).mean() > ALPHA
