"""The controllers' rules, checked on small questions whose answers and costs are worked by hand.

Branch orders come from ``random.Random(seed).shuffle``; each test first asks the same shuffle
what order a seed gives, then states what the controller must do on that order.
"""

from __future__ import annotations

import random

import pytest

from pr1_eval.ingest.parallel_probe import ProbeBranch, ProbeQuestion
from pr1_eval.replay.controllers import (
    AdaptiveConsistency,
    ConvergenceProbe,
    EarlyStoppingConsistency,
    MajorityVote,
)
from pr1_eval.replay.evaluate import answer_question, replay
from pr1_eval.replay.probe import ParallelProbe, ParallelProbeAllVote
from pr1_eval.replay.state import BranchesExhausted, QuestionState
from pr1_eval.stats.consistency import asc_confidence


def question(*branches: tuple[list[str], int, str], gold: str = "7", interval: int = 100) -> ProbeQuestion:
    return ProbeQuestion(index=0, question="q", gold=gold, probe_interval=interval,
                         branches=tuple(ProbeBranch(tuple(p), t, f) for p, t, f in branches))


def identity_seed(n: int) -> int:
    """A seed whose shuffle of n items keeps them in place (so tests can state the order)."""
    for seed in range(100_000):
        order = list(range(n))
        random.Random(seed).shuffle(order)
        if order == list(range(n)):
            return seed
    raise AssertionError("no identity seed")


def test_state_order_is_the_seeded_shuffle_of_file_order() -> None:
    q = question(*[([], 10 * i + 1, str(i)) for i in range(6)])
    order = [str(i) for i in range(6)]
    random.Random(3).shuffle(order)
    state = QuestionState(q, 3)
    assert [state.take_final() for _ in range(6)] == order
    with pytest.raises(BranchesExhausted):
        state.take_final()


def test_probe_costs_whole_intervals_and_the_remainder_never_below_zero() -> None:
    # 250 tokens, two probes of 100: 100 + 100 + the remaining 50; 150 tokens, two probes: 100 + 100 + 0.
    s = identity_seed(2)
    state = QuestionState(question((["a", "b"], 250, "c"), (["x", "y"], 150, "z")), s)
    assert state.probe_new() == ("a", 0, False)
    assert state.probe_more(0) == ("b", False)
    assert state.probe_more(0) == ("c", True)
    assert state.probe_new() == ("x", 1, False)
    state.probe_more(1)
    assert state.probe_more(1) == ("z", True)
    assert state.started_charges() == [250, 200]  # the second is charged past its length, as the authors do


def test_majority_vote_counts_first_seen_on_ties_and_all_tokens() -> None:
    s = identity_seed(4)
    q = question(([], 10, "5"), ([], 20, "7"), ([], 30, "7"), ([], 40, "5"))
    outcome = answer_question(MajorityVote(4), q, s)
    assert outcome.answer == "5"  # 2-2 tie: the answer seen first wins (Counter.most_common)
    assert (outcome.tokens, outcome.sequential_tokens, outcome.branches_started) == (100, 40, 4)


def test_esc_stops_at_the_first_unanimous_window_and_sums_window_maxima() -> None:
    s = identity_seed(6)
    q = question(([], 10, "1"), ([], 50, "2"), ([], 20, "7"), ([], 30, "7"), ([], 5, "9"), ([], 5, "9"))
    outcome = answer_question(EarlyStoppingConsistency(n=6, window=2), q, s)
    assert outcome.answer == "7"
    assert outcome.tokens == 10 + 50 + 20 + 30
    assert outcome.sequential_tokens == 50 + 30  # windows run one after another


def test_asc_confidence_is_the_beta_tail_worked_by_hand() -> None:
    # With v2 = 0, BetaCDF(0.5; v1 + 1, 1) = 0.5 ** (v1 + 1).
    assert asc_confidence(3, 0) == pytest.approx(1 - 0.5 ** 4)
    assert asc_confidence(4, 0) == pytest.approx(1 - 0.5 ** 5)
    s = identity_seed(6)
    q = question(*[([], 10, "7")] * 6)
    outcome = answer_question(AdaptiveConsistency(n=6, threshold=0.95), q, s)
    assert outcome.branches_started == 4  # 1 - 0.5**4 = 0.9375 <= 0.95 < 1 - 0.5**5 = 0.96875
    assert outcome.answer == "7"


def test_convergence_probe_stops_after_patience_equal_probe_answers() -> None:
    s = identity_seed(1)
    q = question((["3", "7", "7", "7", "7"], 1000, "7"))
    outcome = answer_question(MajorityVote(1, ConvergenceProbe(patience=3)), q, s)
    assert outcome.answer == "7"
    assert outcome.tokens == 4 * 100  # probes 3, 7, 7, 7: the streak of three 7s ends it


def test_parallel_probe_prunes_a_straying_branch_and_stops_on_a_stable_majority() -> None:
    # Three branches, warm_up 0, patience 2, stable 2. Steps (after the start probe):
    #   step 0: answers 7 7 1 -> majority 7 (new), branch 2 off track 1, stable 0
    #   step 1: answers 7 7 1 -> 7, branch 2 off track 2 -> pruned, stable 1
    #   step 2: answers 7 7 (branch 2 no longer probed) -> 7, stable 2 -> stop with 7.
    s = identity_seed(3)
    q = question((["7"] * 9, 2000, "7"), (["7"] * 9, 2000, "7"), (["1"] * 9, 2000, "1"))
    outcome = answer_question(ParallelProbe(branches=3, stable=2, patience=2, warm_up=0), q, s)
    assert outcome.answer == "7"
    # start probe + 3 steps for the two kept branches; start + 2 steps for the pruned one.
    assert outcome.tokens == 4 * 100 * 2 + 3 * 100
    assert outcome.sequential_tokens == 400


def test_parallel_probe_all_vote_keeps_pruned_branches_voting() -> None:
    # Two of three say 1 at first; with every branch voting, 1 stays the majority after pruning
    # the 7-branch, while the active-only vote would follow the branches still probed.
    s = identity_seed(3)
    q = question((["1"] * 9, 2000, "1"), (["1"] * 9, 2000, "1"), (["7"] * 9, 2000, "7"))
    outcome = answer_question(ParallelProbeAllVote(branches=3, stable=1, patience=5, warm_up=0), q, s)
    assert outcome.answer == "1"
    assert outcome.tokens == 3 * 100 * 3  # start + 2 steps each: stable reaches 1 at step 1


def test_replay_averages_per_seed_means_and_scores_exact_strings() -> None:
    q = question(([], 10, "7"), ([], 10, "7.0"), gold="7")
    result = replay(MajorityVote(1), [q], seeds=range(20))
    orders = []
    for seed in range(20):
        order = ["7", "7.0"]
        random.Random(seed).shuffle(order)
        orders.append(order[0] == "7")
    assert result.accuracy == pytest.approx(sum(orders) / 20)  # "7.0" is not the gold's string
    assert result.tokens == 10
