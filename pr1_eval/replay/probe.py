"""Parallel-Probe: many branches probed together, pruned when they stray, stopped at consensus.

Two variants, as the authors define them (``evaluation/method.py``), step for step:

* :class:`ParallelProbe` (their ``ParallelESTPruningBurstMajorityOnActiveBranches``, the row their
  table calls *Parallel-Probe*): the vote counts only branches not pruned; a pruned branch is never
  probed again; pruning starts at step ``warm_up`` and needs more than one active branch; after
  pruning the majority is recounted over the remaining branches.
* :class:`ParallelProbeAllVote` (their ``ParallelESTPruning``): every branch keeps voting with its
  last answer, pruned or finished; pruning needs more than one *unfinished* branch.

Both stop when the majority answer has stayed the same for ``stable`` consecutive steps (the
comparison with the previous step's majority starts at the first step, whose predecessor is none),
when every branch has finished or been pruned, or after ``max_steps`` steps, and report the last
majority. Their entropy and within-branch stability checks are disabled in the published rows, so
they are not modelled.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from pr1_eval.replay.state import QuestionState


def _majority(answers: list[str]) -> str:
    return Counter(answers).most_common(1)[0][0]


def _start(state: QuestionState, branches: int) -> tuple[list[str], list[int], list[bool]]:
    """Start ``branches`` branches with one probe each: (last answers, indices, finished flags)."""
    history: list[str] = []
    index: list[int] = []
    finished: list[bool] = []
    for _ in range(branches):
        answer, i, done = state.probe_new()
        history.append(answer)
        index.append(i)
        finished.append(done)
    return history, index, finished


@dataclass(frozen=True)
class ParallelProbe:
    """Parallel-Probe with the vote over active (unpruned) branches."""

    branches: int = 64
    stable: int = 40
    patience: int = 7
    warm_up: int = 15
    burst: int = 1
    max_steps: int = 100

    def __call__(self, state: QuestionState) -> str | None:
        history, index, finished = _start(state, self.branches)
        pruned = [False] * self.branches
        off_track = [0] * self.branches
        previous: str | None = None
        stable = 0
        for step in range(self.max_steps):
            active = self._advance(state, history, index, finished, pruned)
            if not active:
                break
            winner = _majority([history[i] for i in active])
            if step >= self.warm_up and len(active) > 1:
                for i in active:
                    if finished[i]:
                        continue
                    off_track[i] = off_track[i] + 1 if history[i] != winner else 0
                    if off_track[i] >= self.patience:
                        pruned[i] = True
                active = [i for i in active if not pruned[i]]
                if not active:
                    break
                winner = _majority([history[i] for i in active])
            stable = stable + 1 if winner == previous else 0
            previous = winner
            if stable >= self.stable:
                return winner
            if all(f or p for f, p in zip(finished, pruned, strict=True)):
                break
        return previous

    def _advance(self, state: QuestionState, history: list[str], index: list[int], finished: list[bool],
                 pruned: list[bool]) -> list[int]:
        """Probe every unpruned, unfinished branch ``burst`` times; the unpruned branches."""
        active = []
        for i in range(self.branches):
            if pruned[i]:
                continue
            if not finished[i]:
                for _ in range(self.burst):
                    if finished[i]:
                        break
                    history[i], finished[i] = state.probe_more(index[i])
            active.append(i)
        return active


@dataclass(frozen=True)
class ParallelProbeAllVote:
    """Parallel-Probe where pruned and finished branches keep voting with their last answer."""

    branches: int = 64
    stable: int = 40
    patience: int = 7
    warm_up: int = 15
    max_steps: int = 100

    def __call__(self, state: QuestionState) -> str | None:
        history, index, finished = _start(state, self.branches)
        off_track = [0] * self.branches
        previous: str | None = None
        stable = 0
        for step in range(self.max_steps):
            for i in range(self.branches):
                if not finished[i]:
                    history[i], finished[i] = state.probe_more(index[i])
            alive = sum(not f for f in finished)
            winner = _majority(history)
            if step >= self.warm_up and alive > 1:
                for i in range(self.branches):
                    if not finished[i]:
                        off_track[i] = off_track[i] + 1 if history[i] != winner else 0
                        if off_track[i] >= self.patience:
                            finished[i] = True
            stable = stable + 1 if winner == previous else 0
            previous = winner
            if stable >= self.stable:
                return winner
            if all(finished):
                break
        return previous
