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

**The confidence sequence** is :class:`pr1_eval.stats.mode.ModeSequence` (a betting construction,
Waudby-Smith & Ramdas 2024; its guarantee and why it is built so are written there).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from pr1_eval.ingest.parallel_probe import NO_ANSWER, ProbeQuestion
from pr1_eval.replay.state import BranchesExhausted, QuestionState
from pr1_eval.stats.mode import ModeSequence


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
