"""The fixed-k test looked at after every round with α spent: boundaries against published designs, the
repeated p-values' level by simulation, and the statistic against a hand computation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from pr1_eval.stats import group_sequential as gs
from pr1_eval.stats.ranking_verdicts import DecideSettings, decide

FIVE = (0.2, 0.4, 0.6, 0.8, 1.0)


@pytest.mark.parametrize(("spending", "published"), [
    # Lan-DeMets spending, five equally spaced looks, one-sided 0.025 (Jennison & Turnbull table 7.6; gsDesign)
    ("obrien-fleming", [4.877, 3.357, 2.680, 2.290, 2.031]),
    ("pocock", [2.438, 2.427, 2.410, 2.397, 2.389]),
])
def test_boundaries_match_the_published_designs(spending: str, published: list[float]) -> None:
    assert gs.boundaries(FIVE, [0.025], spending)[:, 0] == pytest.approx(published, abs=0.006)


def test_one_look_at_the_end_is_the_fixed_test() -> None:
    table = gs.boundary_table((1.0,))
    z = np.linspace(0.5, 6.5, 25)
    assert gs.repeated_p(z, np.zeros(z.size, dtype=int), table) == pytest.approx(norm.sf(z), rel=2e-3)
    assert gs.repeated_p(np.array([-1.0]), np.array([0]), table)[0] == 1.0  # not even level 0.5 crosses


@pytest.mark.parametrize("spending", ["obrien-fleming", "pocock"])
def test_the_smallest_repeated_p_value_over_the_looks_keeps_its_level(spending: str) -> None:
    """Under the null, the chance that the running minimum ever falls to u is u (Brownian scores at the looks);
    looks at 4, 8, 16, 32, 64 of 64 as a sweep takes them. 40,000 paths: MC SE 0.0011 at u = 0.05."""
    looks = np.array([4, 8, 16, 32, 64])
    t = looks / 64
    table = gs.boundary_table(tuple(t), spending)
    rng = np.random.default_rng(7)
    score = np.cumsum(rng.normal(size=(40_000, len(t))) * np.sqrt(np.diff(t, prepend=0)), axis=1)
    z = score / np.sqrt(t)
    p = gs.repeated_p(z, np.broadcast_to(np.arange(len(t)), z.shape), table).min(axis=1)
    for u in (0.05, 0.01):
        assert abs((p <= u).mean() - u) < 4 * np.sqrt(u * (1 - u) / len(p)) + 0.002
    # skipping looks (a checkpoint paused for a round) only makes the test stricter
    skipped = gs.repeated_p(z[:, [0, 2, 4]], np.broadcast_to(np.array([0, 2, 4]), (len(z), 3)), table).min(axis=1)
    assert (skipped >= p - 1e-12).all()


def test_the_statistic_is_the_fixed_k_tests() -> None:
    d = np.array([[1, 0, 1, 1], [0, 0, -1, 0], [1, 1, 1, 1]], dtype=float)  # 3 problems × 4 samples
    ev = gs.z_evidence(d)
    means, variances = d.mean(axis=1), d.var(axis=1, ddof=1)  # by hand at n = 4
    assert ev.estimate[-1] == pytest.approx(means.mean())
    assert ev.se[-1] == pytest.approx(np.sqrt(variances.sum() / (9 * 4)), rel=1e-6)
    assert np.isnan(ev.se[0]) and ev.estimate[1] == pytest.approx((1 + 0 + 0 + 0 + 1 + 1) / 6)
    p = gs.look_p_values(ev.at(np.array(0)), 0.1, np.array(0), gs.boundary_table((0.25, 1.0)))
    assert all(float(x) == 1.0 for x in p)  # one sample: no variance, no test


def test_a_sweep_decides_with_alpha_spending_and_old_records_replay_with_their_rule() -> None:
    rng = np.random.default_rng(3)
    base = rng.uniform(0.2, 0.6, 30)
    runs = [rng.random((30, 16)) < q[:, None] for q in (base + 0.3, base)]  # at 16 of 64 the boundary is ~5
    spent = decide(runs, DecideSettings("ranking", delta=0.05, k_max=64))
    assert spent.pairs[0].verdict == "a better" and spent.pairs[0].low > 0
    old = DecideSettings.from_dict({"question": "ranking", "alpha": 0.05, "delta": 0.05, "k_max": 64})
    assert old.test == "cs" and DecideSettings.from_dict(spent.settings.to_dict()).test == "obrien-fleming"
    with pytest.raises(Exception, match="--decide-test"):
        DecideSettings(test="bonferroni").check()


def test_one_look_at_stored_runs_is_the_fixed_test_whatever_k_max() -> None:
    """Runs not written round by round get one look; it must spend all of α even where k_max is larger than
    what the pair holds (a 16-sample run beside 8-sample ones), not the share of α a sweep's look at 8 of 16 has."""
    rng = np.random.default_rng(5)
    base = rng.uniform(0.2, 0.6, 30)
    runs = [rng.random((30, 8)) < q[:, None] for q in (base + 0.1, base)]
    alone = decide(runs, DecideSettings("ranking", delta=0.05, k_max=8), looks=[]).pairs[0]
    beside = decide(runs, DecideSettings("ranking", delta=0.05, k_max=16), looks=[]).pairs[0]
    assert (beside.low, beside.high) == pytest.approx((alone.low, alone.high))
    z = alone.estimate / gs.z_evidence(runs[0].astype(float) - runs[1]).se[-1]
    assert alone.high - alone.estimate == pytest.approx(alone.estimate / z * norm.isf(0.05 / 2), rel=1e-3)
