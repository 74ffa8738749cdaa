"""A test-time controller with a guarantee: stop branching once the majority answer is certified.

ESC, ASC and Parallel-Probe (:mod:`pr1_eval.replay.controllers`, :mod:`pr1_eval.replay.probe`) stop
by heuristics: nothing bounds how often they stop on an answer that is not the one a full vote would
converge to. ``cert`` reads whole branches one at a time (``batch`` at a time if asked) and stops
once an anytime-valid **confidence sequence for the mode** of the answer distribution holds one
answer class only; it then reports that class. Guarantee, for branches drawn independently from the
model's answer distribution: the chance that it ever certifies a class that is not a mode is at
most ``alpha``, whatever the answers, however many classes there are (the answer set need not be
known in advance), however often it looks and whenever it stops. Uncertified at the budget ``n``,
it reports the plain majority and counts the question as not certified.

**Votes are counted by answer class**: math-equivalent answers (``1/2`` and ``\\frac{1}{2}``) are
one class, by the project's one grader (:func:`pr1_eval.replay.rows.grader_classes`,
from :func:`pr1_eval.grading.grade.answer_classes_many`); a branch with no answer votes for nothing.

**The confidence sequence** (a betting construction, Waudby-Smith & Ramdas 2024). Let L_s be the
leading class after the first s − 1 answers (most votes, earliest first on ties: known before
answer s is read) and, for every class j, the wealth

    K_t(j) = mean over λ ∈ Λ of Π_{s ≤ t, L_s ≠ j} (1 + λ·(1{X_s = L_s} − 1{X_s = j}))

(Λ: :data:`LAMBDAS`, a fixed grid in (0, 1)). If j is a mode, p_j ≥ p_{L_s}, so each factor has
conditional mean 1 + λ(p_{L_s} − p_j) ≤ 1: K(j) is a nonnegative supermartingale starting at 1, and
by Ville's inequality it ever reaches 1/alpha with probability ≤ alpha. So C_t = {j : K_t(j) <
1/alpha} contains every mode at every t with probability ≥ 1 − alpha, and stopping once C_t holds
only the leader certifies a mode with that probability. K(j) depends on two counts only (answers
that were the leader's while j did not lead, and j's own answers while it did not lead), and every
class never seen shares one K, so the set of possible answers never has to be listed.

Why this and not a pairwise test of the leader against the runner-up: the leader is chosen by the
data, so a fixed-pair test would need a union over every class that could lead (unbounded when the
answer set is unknown); here the error event needs the *true mode's* K to cross, one process. Why a
grid mixture over λ rather than one λ: no tuning; it pays about log |Λ| in evidence for adapting to
the gap between the top two classes, from a clear winner (large λ) to near-ties (small λ).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from pr1_eval.ingest.parallel_probe import NO_ANSWER, ProbeQuestion
from pr1_eval.replay.state import BranchesExhausted, QuestionState

#: The bets mixed in every K(j): 20 evenly spaced λ in (0, 1).
LAMBDAS = np.arange(1, 21) / 21.0
_LOG_UP, _LOG_DOWN = np.log1p(LAMBDAS), np.log1p(-LAMBDAS)


@lru_cache(maxsize=65536)
def log_wealth(wins: int, losses: int) -> float:
    """log K(j) from its two counts: log mean_λ (1 + λ)^wins (1 − λ)^losses (kept: a replay asks for
    the same few thousand pairs millions of times)."""
    terms = wins * _LOG_UP + losses * _LOG_DOWN
    top = float(terms.max())
    return top + math.log(float(np.mean(np.exp(terms - top))))


@dataclass
class ModeSequence:
    """The running confidence sequence for the mode over a stream of answer classes (None: no answer)."""

    alpha: float = 0.05
    counts: Counter[str] = field(default_factory=Counter)
    order: dict[str, int] = field(default_factory=dict)  # first appearance, for ties
    leader_hits: int = 0  # answers equal to the leader of their time: the unseen classes' wins
    wins: Counter[str] = field(default_factory=Counter)  # leader hits counted while j itself led (subtracted)
    losses: Counter[str] = field(default_factory=Counter)  # j's answers while j did not lead

    def leader(self) -> str | None:
        if not self.counts:
            return None
        return max(self.counts, key=lambda c: (self.counts[c], -self.order[c]))

    def add(self, answer_class: str | None) -> None:
        """One more answer: bet on it against every class, with the leader fixed before reading it."""
        if answer_class is None:
            return
        lead = self.leader()
        if lead is not None:
            if answer_class == lead:
                self.leader_hits += 1
                self.wins[lead] += 1  # K(lead) places no bet while it leads: undo its win below
            else:
                self.losses[answer_class] += 1
        self.order.setdefault(answer_class, len(self.order))
        self.counts[answer_class] += 1

    def log_k(self, answer_class: str) -> float:
        """log K(j) for any class j (one never seen included)."""
        return log_wealth(self.leader_hits - self.wins[answer_class], self.losses[answer_class])

    def plausible(self) -> list[str]:
        """The seen classes still in the confidence set (an unseen class is in it while K(unseen) < 1/alpha)."""
        level = math.log(1 / self.alpha)
        return [c for c in self.counts if self.log_k(c) < level]

    def certified(self) -> str | None:
        """The leader, once every other class (seen or not) is out of the confidence set; else None."""
        lead = self.leader()
        if lead is None:
            return None
        level = math.log(1 / self.alpha)
        if log_wealth(self.leader_hits, 0) < level:  # a class never seen could still be the mode
            return None
        return lead if all(self.log_k(c) >= level for c in self.counts if c != lead) else None


def answer_key(answer: str, question: str, classes: Mapping[tuple[str, str], str] | None) -> str | None:
    """The class an answer votes for: its grader class where known, else the string; None for no answer."""
    if answer in (NO_ANSWER, "") or not answer.strip():
        return None
    if classes is None:
        return answer
    return classes.get((question, answer), answer)


@dataclass(frozen=True)
class CertifiedMajority:
    """``cert@n``: whole branches until the mode is certified at level ``alpha`` (module docstring)."""

    n: int = 64
    alpha: float = 0.05
    batch: int = 1
    classes: Mapping[tuple[str, str], str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must lie in (0, 1), got {self.alpha}")
        if self.batch < 1:
            raise ValueError(f"batch must be at least 1, got {self.batch}")

    def decide(self, state: QuestionState) -> tuple[str | None, bool]:
        """(reported answer, whether it was certified)."""
        sequence = ModeSequence(self.alpha)
        spellings: dict[str, Counter[str]] = {}
        read = 0
        while read < self.n:
            for _ in range(min(self.batch, self.n - read)):
                try:
                    answer = state.take_final()
                except BranchesExhausted:
                    read = self.n
                    break
                read += 1
                key = answer_key(answer, state.question, self.classes)
                sequence.add(key)
                if key is not None:
                    spellings.setdefault(key, Counter())[answer] += 1
            winner = sequence.certified()
            if winner is not None:
                return spellings[winner].most_common(1)[0][0], True
        lead = sequence.leader()
        return (None if lead is None else spellings[lead].most_common(1)[0][0]), False

    def __call__(self, state: QuestionState) -> str | None:
        return self.decide(state)[0]


def mode_classes(question: ProbeQuestion, classes: Mapping[tuple[str, str], str] | None) -> tuple[set[str], float]:
    """The question's modal class(es) over all its branches, and the gap between the top two shares
    (of answered branches): the closer to 0, the harder certifying is."""
    counts = Counter(k for b in question.branches
                     if (k := answer_key(b.final_answer, question.question, classes)) is not None)
    if not counts:
        return set(), 0.0
    top = counts.most_common()
    best = top[0][1]
    second = top[1][1] if len(top) > 1 else 0
    return {c for c, n in counts.items() if n == best}, (best - second) / sum(counts.values())
