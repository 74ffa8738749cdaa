"""The sweep's decisions from pairwise confidence sequences: weights, step-down, best, who samples next."""

from __future__ import annotations

import numpy as np
import pytest

from pr1_eval.stats import paired_sequential as ps
from pr1_eval.stats import ranking_sequential as rs
from pr1_eval.stats.paired import holm


def test_step_down_with_equal_weights_is_holm() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = rng.uniform(0, 0.1, 12) ** 2
        adjusted = np.array(holm(list(p)), dtype=float)
        assert (rs.step_down(p, np.full(12, 1 / 12), 0.0, 0.05) == (adjusted <= 0.05)).all()


def test_weights_of_late_arrivals_never_exceed_the_total() -> None:
    weights, kept = rs.pair_weights(12)
    assert weights.shape == (66,) and np.allclose(weights, 0.9 / 66) and kept == pytest.approx(0.1)
    planned = rs.as_matrix(weights, 12)
    for count in (13, 20, 40):  # 1, 8 and 28 checkpoints beyond the 12 planned
        w, rest = rs.pair_weights(count, planned=12)
        assert w.sum() + rest == pytest.approx(1.0) and rest > 0
        assert np.allclose(rs.as_matrix(w, count)[:12, :12], planned)  # a set weight never changes
        assert np.allclose(rs.as_matrix(w, count)[12, :12], 0.1 / 2 / 12)  # the 13th: half the reserve, 12 pairs
    with pytest.raises(ValueError):
        rs.pair_weights(13, planned=12, reserve=0)


def test_round_bounds() -> None:
    assert rs.round_bounds(4, 64) == [4, 8, 16, 32, 64]
    assert rs.round_bounds(4, 64, 1.5) == [4, 6, 9, 14, 21, 32, 48, 64]
    assert rs.round_bounds(8, 4) == [4]


def test_best_needs_every_remaining_rival_within_delta() -> None:
    cert = rs.Certified.none((3, 3))
    beats, close = cert.beats.copy(), cert.close.copy()
    beats[0, 2] = True  # 0 beats 2: 2 is out
    close[0, 1] = True  # 0 is not worse than 1 by δ
    got = rs.Certified(beats, close)
    assert rs.eliminated(got).tolist() == [False, False, True]
    assert rs.declared_best(got, np.array([0.5, 0.6, 0.1])) == 0
    assert rs.declared_best(rs.Certified(beats, np.zeros((3, 3), bool)), np.array([0.5, 0.6, 0.1])) == -1
    assert rs.open_checkpoints("best", got).tolist() == [True, True, False]


def test_family_wise_error_over_a_sweep_with_ties_and_near_ties() -> None:
    """Five checkpoints (a duplicate pair, a near-tie) sampled in rounds, the losers dropped as the rule
    says: any wrong sign, 'within' or best across the sweep in at most α of 400 sweeps."""
    rng = np.random.default_rng(7)
    base = rng.uniform(0.05, 0.95, 30)
    p = np.stack([base, base, np.clip(base + 0.01, 0, 1), np.clip(base + 0.15, 0, 1), np.clip(base - 0.2, 0, 1)])
    means = p.mean(axis=1)
    count, k_max, delta, reps = 5, 32, 0.05, 400
    x = rng.random((reps, count, 30, k_max)) < p[None, :, :, None]
    a, b = np.triu_indices(count, 1)
    ev = ps.evidence(x[:, a].astype(float) - x[:, b])
    weights, kept = rs.pair_weights(count)
    running = rs.Running.start((reps, len(a)))
    held = np.zeros((reps, count), dtype=int)
    active = np.ones((reps, count), dtype=bool)
    for bound in rs.round_bounds(4, k_max):
        held = np.where(active, bound, held)
        look = np.minimum(held[:, a], held[:, b])
        running = running.update(ev.at(look - 1), delta, look > 0)
        cert = rs.certify(running, weights, kept, 0.05, count)
        active = rs.open_checkpoints("best", cert)
    gap = means[:, None] - means[None, :]
    wrong = ((cert.beats & (gap <= 0)) | (cert.close & (gap <= -delta))).any(axis=(-1, -2))
    best = rs.declared_best(cert, means[None].repeat(reps, 0))
    wrong |= (best >= 0) & (means.max() - means[np.maximum(best, 0)] >= delta)
    assert wrong.mean() <= 0.05
    assert cert.beats[:, 3, 4].mean() > 0.9  # the 35-point gap is found
