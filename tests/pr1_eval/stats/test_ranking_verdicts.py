"""The verdicts of an adaptive sweep from stored verdict matrices (what the sweep and a stored-run check call)."""

from __future__ import annotations

import numpy as np
import pytest

from pr1_eval.errors import Pr1EvalError
from pr1_eval.stats.ranking_verdicts import DecideSettings, decide


def _runs(rng: np.random.Generator, p: list[np.ndarray], n: list[int]) -> list[np.ndarray]:
    return [rng.random((q.size, k)) < q[:, None] for q, k in zip(p, n, strict=True)]


def test_a_clear_gap_is_decided_and_the_loser_stops() -> None:
    rng = np.random.default_rng(0)
    base = rng.uniform(0.1, 0.5, 30)
    d = decide(_runs(rng, [base + 0.45, base, base], [8, 8, 8]), DecideSettings("best", delta=0.1, k_max=64))
    first = {(p.a, p.b): p for p in d.pairs}
    assert first[(0, 1)].verdict == "a better" and first[(0, 2)].verdict == "a better"
    assert first[(0, 1)].low > 0 and first[(0, 1)].low <= first[(0, 1)].estimate <= first[(0, 1)].high
    assert d.eliminated == [False, True, True] and d.best == 0 and d.finished
    assert d.held == [8, 8, 8]


def test_undecided_pairs_say_what_they_resolve_and_keep_sampling() -> None:
    rng = np.random.default_rng(1)
    base = rng.uniform(0.3, 0.7, 30)
    d = decide(_runs(rng, [base, base + 0.03], [4, 4]), DecideSettings("ranking", delta=0.05, k_max=64))
    (pair,) = d.pairs
    assert pair.verdict == "undecided" and pair.resolved > 0.05 and d.open == [True, True] and not d.finished


def test_a_pair_compares_the_samples_both_hold_and_a_capped_sweep_stops() -> None:
    rng = np.random.default_rng(2)
    base = rng.uniform(0.3, 0.7, 30)
    d = decide(_runs(rng, [base, base], [16, 4]), DecideSettings("ranking", delta=0.2, k_max=16))
    assert d.pairs[0].pairs == 4 and d.open == [False, True]  # the one at k_max stops, the other catches up
    hopeless = decide(_runs(rng, [base, base], [16, 4]), DecideSettings("ranking", delta=0.05, k_max=16))
    assert hopeless.open == [False, False] and hopeless.finished  # ±5 points is out of reach by 16: not chased
    capped = decide(_runs(rng, [base, base], [16, 16]), DecideSettings("ranking", delta=0.05, k_max=16))
    assert capped.finished and capped.pairs[0].verdict == "undecided"


def test_the_parser_offers_the_questions_the_rule_knows() -> None:
    from pr1_eval.cli.sweep_adaptive import DECIDE_TESTS
    from pr1_eval.cli.sweep_adaptive import QUESTIONS as OFFERED
    from pr1_eval.stats.ranking_sequential import QUESTIONS
    from pr1_eval.stats.ranking_verdicts import TESTS

    assert OFFERED == QUESTIONS and DECIDE_TESTS == TESTS


def test_settings_are_checked_and_round_trip() -> None:
    s = DecideSettings("ranking", 0.1, 0.02, 32, 2, 1.5, planned=12)
    assert DecideSettings.from_dict(s.to_dict()) == s and s.bounds() == [2, 3, 5, 8, 12, 18, 27, 32]  # × 1.5, rounded up
    with pytest.raises(Pr1EvalError, match="--decide"):
        DecideSettings("fastest").check()
    with pytest.raises(Pr1EvalError, match="--delta"):
        DecideSettings(delta=5).check()
