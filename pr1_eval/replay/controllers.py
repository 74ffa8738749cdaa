"""Test-time controllers: how many branches to read, how far, and which answer to report.

Each controller is a pure rule over a :class:`~pr1_eval.replay.state.QuestionState`; the rules
are the Parallel-Probe authors' (``evaluation/method.py``), so a replay reproduces their table:

* ``sc`` — self-consistency, SC@n: read n whole branches, report the most frequent final answer.
* ``esc`` — Early-Stopping Self-Consistency (Li et al., ICLR 2024): read whole branches in windows
  of ``window``; stop at the first window whose answers all agree; else vote over all n.
* ``asc`` — Adaptive-Consistency (Aggarwal et al., 2023): read whole branches one at a time; stop
  once P(p1 > p2) under Beta(v1 + 1, v2 + 1) exceeds ``threshold`` (v1, v2: the two top counts).
* ``sac`` — one branch probed every interval; stop once ``patience`` consecutive probe answers
  agree (the authors' ConvergenceProbeStrategy, "SAC" in their table); ``sc+sac`` votes n of them.
* ``probe`` — Parallel-Probe: start ``branches`` branches together and probe them all every
  interval; after ``warm_up`` steps prune a branch that has disagreed with the majority of the
  active branches ``patience`` times in a row; stop once the majority has not changed for
  ``stable`` consecutive steps (at most ``max_steps`` steps).
* ``probe-all`` — the same without the active-only vote (ParallelESTPruning: pruned branches keep
  voting with their last answer, and pruning needs more than one unfinished branch).

Votes are ``collections.Counter.most_common`` over the answer strings, so a tie goes to the answer
seen first, exactly as the authors count; ``"ERR"`` (no answer at that probe) is a string like any
other. The report's maj@k uses a stricter, order-free tie rule
(:data:`pr1_eval.stats.metrics.MAJ_TIE_RULE`); the replay keeps the authors' rule because its
purpose is to reproduce and extend their figures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from pr1_eval.replay.state import BranchesExhausted, QuestionState
from pr1_eval.stats.consistency import asc_confidence

#: A branch-level rule: read one branch (or a group) and return its answer.
BranchRule = Callable[[QuestionState], str | None]


def _vote(answers: list[str]) -> str | None:
    return Counter(answers).most_common(1)[0][0] if answers else None


def read_whole(state: QuestionState) -> str | None:
    """One whole branch's final answer (None when the branches are used up)."""
    try:
        return state.take_final()
    except BranchesExhausted:
        return None


@dataclass(frozen=True)
class ConvergenceProbe:
    """Probe one branch until ``patience`` consecutive probe answers agree, or it ends."""

    patience: int = 14
    warmup_steps: int = 0
    burst: int = 1

    def __call__(self, state: QuestionState) -> str | None:
        try:
            answer, index, finished = state.probe_new()
        except BranchesExhausted:
            return None
        if self.patience <= 1 or finished:
            return answer
        last, streak, trigger = answer, 1, 0
        while not finished:
            for _ in range(self.burst):
                if finished:
                    break
                answer, finished = state.probe_more(index)
            streak, last = (streak + 1, last) if answer == last else (1, answer)
            trigger += 1
            if trigger >= self.warmup_steps and streak >= self.patience:
                return answer
        return answer


@dataclass(frozen=True)
class MajorityVote:
    """SC@n: n branches read by ``rule``, the most frequent answer."""

    n: int = 64
    rule: BranchRule = read_whole

    def __call__(self, state: QuestionState) -> str | None:
        answers = [a for a in (self.rule(state) for _ in range(self.n)) if a is not None]
        return _vote(answers)


@dataclass(frozen=True)
class AdaptiveConsistency:
    """ASC: one branch at a time until the leading answer is confidently ahead, at most n."""

    n: int = 64
    threshold: float = 0.95

    def __call__(self, state: QuestionState) -> str | None:
        answers: list[str] = []
        for _ in range(self.n):
            answer = read_whole(state)
            if answer is not None:
                answers.append(answer)
            if len(answers) < 2:
                continue
            top = Counter(answers).most_common(2)
            if asc_confidence(top[0][1], top[1][1] if len(top) > 1 else 0) > self.threshold:
                return top[0][0]
        return _vote(answers)


@dataclass(frozen=True)
class EarlyStoppingConsistency:
    """ESC: whole branches in windows; stop at the first unanimous window, else vote over all."""

    n: int = 64
    window: int = 8

    def __call__(self, state: QuestionState) -> str | None:
        answers: list[str] = []
        for _ in range(self.n // self.window):
            current = [a for a in (read_whole(state) for _ in range(self.window)) if a is not None]
            if not current:
                continue
            answers.extend(current)
            if len(set(current)) == 1:
                return current[0]
        return _vote(answers)
