"""The certified-majority controller (``cert``) against independent computations: its wealth written
out from the definition, its error probability enumerated exactly over every answer sequence, and
simulated where the answer set is large and unknown."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from pr1_eval.errors import Pr1EvalError
from pr1_eval.ingest.parallel_probe import ProbeBranch, ProbeQuestion
from pr1_eval.replay.certified import CertifiedMajority, mode_classes
from pr1_eval.replay.evaluate import answer_question
from pr1_eval.replay.rows import grader_classes
from pr1_eval.replay.specs import parse_spec
from pr1_eval.replay.state import QuestionState
from pr1_eval.stats.mode import LAMBDAS, ModeSequence


def _wealth_by_definition(stream: list[str], j: str) -> float:
    """K_t(j) = mean_λ Π_{s: L_s ≠ j} (1 + λ(1{X_s = L_s} − 1{X_s = j})), L_s the leader before s."""
    total = 0.0
    for lam in LAMBDAS:
        product, counts, first = 1.0, Counter[str](), {}
        for x in stream:
            if counts:
                lead = max(counts, key=lambda c: (counts[c], -first[c]))
                if lead != j:
                    product *= 1 + lam * ((x == lead) - (x == j))
            first.setdefault(x, len(first))
            counts[x] += 1
        total += product
    return total / len(LAMBDAS)


def test_wealth_is_the_product_of_its_definition() -> None:
    rng = np.random.default_rng(0)
    stream = [str(x) for x in rng.choice(4, size=40, p=[0.5, 0.3, 0.15, 0.05])]
    sequence = ModeSequence(0.05)
    for x in stream:
        sequence.add(x)
    for j in ["0", "1", "2", "3", "never seen"]:
        assert math.exp(sequence.log_k(j)) == pytest.approx(_wealth_by_definition(stream, j), rel=1e-9)


def _certifies(stream: tuple[str, ...], alpha: float) -> str | None:
    sequence = ModeSequence(alpha)
    for x in stream:
        sequence.add(x)
        if (winner := sequence.certified()) is not None:
            return winner
    return None


@pytest.mark.parametrize("p_wrong", [0.5, 0.45, 0.35])
def test_the_chance_of_certifying_a_non_mode_enumerated_exactly(p_wrong: float) -> None:
    """Every one of the 2^12 answer sequences of two classes, weighted by its probability: the chance
    of ever certifying "b" (p_b = p_wrong ≤ 1/2, so not the mode, or a tied one at 0.5) is ≤ alpha = 0.2.
    A level-0.2 rule that ignored the leader's randomness (e.g. certifying on 3 agreeing answers)
    fails this."""
    alpha, n = 0.2, 12
    wrong = 0.0
    for stream in itertools.product("ab", repeat=n):
        if _certifies(stream, alpha) == "b":
            b = stream.count("b")
            wrong += p_wrong ** b * (1 - p_wrong) ** (n - b)
    assert wrong <= alpha
    if p_wrong == 0.35:
        assert wrong > 0  # the rule does certify wrongly sometimes: the bound is not vacuous


def test_with_many_rare_answers_the_mode_is_certified_wrongly_at_most_alpha() -> None:
    """The answer set unknown in advance: a mode at 0.12 among 40 rare answers at 0.022 each. Over
    2,000 runs of 64 branches the share of runs certifying another answer stays ≤ alpha (its exact
    95 % Clopper-Pearson upper bound too), while the rule certifies the mode in a fair share of runs
    of a clearer question."""
    rng = np.random.default_rng(5)
    p = np.array([0.12] + [0.022] * 40)
    p = p / p.sum()
    wrong = 0
    for _ in range(2000):
        stream = tuple(str(x) for x in rng.choice(p.size, size=64, p=p))
        winner = _certifies(stream, 0.05)
        wrong += winner is not None and winner != "0"
    assert stats.beta.ppf(0.95, wrong + 1, 2000 - wrong) <= 0.05
    clear = [_certifies(tuple(str(x) for x in rng.choice(3, size=64, p=[0.6, 0.3, 0.1])), 0.05) for _ in range(200)]
    assert clear.count("0") >= 70 and set(clear) <= {"0", None}


def _question(answers: list[str], tokens: int = 100) -> ProbeQuestion:
    return ProbeQuestion(index=0, question="q", gold="1/2", probe_interval=50,
                         branches=tuple(ProbeBranch((), tokens, a) for a in answers))


def test_the_controller_stops_once_certified_and_counts_equivalent_answers_as_one() -> None:
    unanimous = _question(["7"] * 128)
    outcome = answer_question(CertifiedMajority(64, 0.05), unanimous, 0)
    assert outcome.answer == "7" and outcome.branches_started == 8 and outcome.tokens == 800
    # half the branches write 1/2 as \frac{1}{2}: by strings no answer dominates; by class it is unanimous
    split = _question(["1/2", "\\frac{1}{2}"] * 32 + ["ERR"] * 64)
    by_string = CertifiedMajority(64, 0.05, classes={})
    assert by_string.decide(QuestionState(split, 0))[1] is False
    classes = {("q", "1/2"): "1/2", ("q", "\\frac{1}{2}"): "1/2"}
    answer, certified = CertifiedMajority(64, 0.05, classes=classes).decide(QuestionState(split, 0))
    assert certified and answer in ("1/2", "\\frac{1}{2}")
    assert mode_classes(split, classes) == ({"1/2"}, 1.0)


def test_grader_classes_come_from_the_grader() -> None:
    question = _question(["0.5", "\\frac{1}{2}", "1/2", "3", "ERR"])
    classes = grader_classes([question])
    assert classes[("q", "0.5")] == classes[("q", "\\frac{1}{2}")] == classes[("q", "1/2")] == "0.5"
    assert classes[("q", "3")] == "3" and ("q", "ERR") not in classes


def test_the_spec_and_its_errors() -> None:
    spec = parse_spec("cert@32:alpha=0.1,batch=4")
    assert spec.controller == CertifiedMajority(32, 0.1, 4)
    with pytest.raises(Pr1EvalError, match=r"alpha 2 is outside \(0, 1\)"):
        parse_spec("cert@64:alpha=2")
    with pytest.raises(Pr1EvalError, match="not a parameter of cert"):
        parse_spec("cert@64:window=8")
