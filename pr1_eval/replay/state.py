"""What a controller sees of one question during a replay: branches it can start, probe and read.

The rules follow the Parallel-Probe authors' simulator (``evaluation/data_loader.py``) step for
step, because their published Acc / Cost / Seq_Cost are defined by it, quirks included:

* **Order.** The question's branches, in file order, are shuffled with ``random.Random(seed)``;
  controllers take them in that order. (Their SC@64 averages seeds 0–99.)
* **Reading a branch whole** (:meth:`QuestionState.take_final`) costs its total tokens.
* **Probing** (:meth:`QuestionState.probe_new` starts the next branch, :meth:`QuestionState.probe_more`
  advances a started one) costs ``probe_interval`` tokens per probe answer read. After the last
  probe answer, one more step returns the final answer and costs what the branch has left,
  ``max(0, tokens - probe_interval × probes read)``: a branch whose probes overshoot its length is
  charged for the whole last interval (the authors' accounting; it makes probing cost up to one
  interval more than the branch's true length).
* **Cost** of a question is the sum of every branch's charge; its **sequential cost** the largest
  single branch's charge (branches run side by side; ESC's windows are summed, see
  :mod:`pr1_eval.replay.evaluate`).
* Starting past the last branch raises :class:`BranchesExhausted`, which controllers treat as
  "no more samples", as the authors' solvers do.

One deliberate copy of a quirk: ``probe_more`` accepts an index equal to the number of branches
started (the authors check ``index <= started``), though every controller here only probes
started branches.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from pr1_eval.ingest.parallel_probe import ProbeBranch, ProbeQuestion


@lru_cache(maxsize=4096)
def branch_order(seed: int, n: int) -> tuple[int, ...]:
    """The order ``random.Random(seed).shuffle`` puts ``n`` branches in. A shuffle depends only on
    ``n`` and the seed, so it is drawn once per (seed, n) and reused across questions and
    controllers (it was a third of an SC@64 replay's time)."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return tuple(order)


class BranchesExhausted(Exception):
    """A controller asked for a branch beyond the question's last."""


@dataclass
class _Cursor:
    """How far one branch has been read, and what it has cost so far in probes."""

    branch: ProbeBranch
    probes_read: int = 0
    probe_cost: int = 0

    def step(self, interval: int) -> tuple[str, int, bool]:
        """(answer, tokens charged, finished): the next probe answer, else the final answer."""
        if self.probes_read < len(self.branch.probe_answers):
            answer = self.branch.probe_answers[self.probes_read]
            self.probes_read += 1
            self.probe_cost += interval
            return answer, interval, False
        return self.branch.final_answer, max(0, self.branch.tokens - self.probe_cost), True


class QuestionState:
    """One question under one seed: the shuffled branches and the tokens each has been charged."""

    def __init__(self, question: ProbeQuestion, seed: int) -> None:
        branches = [question.branches[i] for i in branch_order(seed, len(question.branches))]
        self.gold = question.gold
        self.question = question.question  # the key of its answers' grader classes (pr1_eval.replay.certified)
        self.interval = question.probe_interval
        self._cursors = [_Cursor(b) for b in branches]
        self.charged = [0] * len(branches)
        self.started = 0

    def take_final(self) -> str:
        """Start the next branch and read it to its end: its final answer, all its tokens charged."""
        if self.started >= len(self._cursors):
            raise BranchesExhausted
        cursor = self._cursors[self.started]
        self.charged[self.started] += cursor.branch.tokens
        self.started += 1
        return cursor.branch.final_answer

    def probe_new(self) -> tuple[str, int, bool]:
        """Start the next branch with one probe: (answer, its index, finished)."""
        if self.started >= len(self._cursors):
            raise BranchesExhausted
        index = self.started
        answer, cost, finished = self._cursors[index].step(self.interval)
        self.charged[index] += cost
        self.started += 1
        return answer, index, finished

    def probe_more(self, index: int) -> tuple[str, bool]:
        """One more probe of branch ``index``: (answer, finished)."""
        if index > self.started:
            raise BranchesExhausted
        answer, cost, finished = self._cursors[index].step(self.interval)
        self.charged[index] += cost
        return answer, finished

    def started_charges(self) -> list[int]:
        """The tokens charged to each started branch, in start order."""
        return self.charged[: self.started]
