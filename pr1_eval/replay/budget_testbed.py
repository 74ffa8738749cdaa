"""A testbed of checkpoints with a known truth, built from real trajectories: one per thinking budget.

Why: a rule that ranks checkpoints (``pr1-eval sweep --adaptive``, :mod:`pr1_eval.stats.paired_sequential`)
must be checked where the truth is known and the outcomes are real. The Parallel-Probe files hold,
per question, 128 branches of one model (Qwen3-8B) with the answer each branch would give if cut
after every ``probe_interval`` tokens. Cutting every branch at a budget B gives a *condition* that
behaves like a checkpoint: a longer budget is a better model on most questions, with real
per-question structure (some questions gain nothing from more thinking, some everything).

The rules (issue 53; :func:`budget_condition`):

* the answer under B is the branch's final answer when it finished within B (``tokens ≤ B``), else
  its last probe at or below B: probe ``j`` (0-based) is the answer after ``(j + 1) × interval``
  tokens, the accounting the authors' replay charges (:mod:`pr1_eval.replay.state`); a branch
  holding fewer probes than that takes its last one. ``"ERR"`` (no answer read) is wrong;
* its cost is ``min(tokens, B)``;
* correct = the answer string equals the gold (the authors' verdict; ``--match grader`` of ``replay``
  differs on five HMMT25 answers only, and a statistics testbed needs a fixed verdict, not the best one);
* the truth of a condition on a question is the mean over its 128 branches, and a draw of a
  condition takes branches *with replacement from its own 128*, independently of every other
  condition (sharing a branch across budgets would make paired differences 1.1–4.4× less variable
  than two real checkpoints'). So a draw is exactly Bernoulli(truth) per question.

Added to what real sweeps have and this family lacks: a **duplicate** of one condition (its truth
equal, so the true gap is exactly 0) and **near-ties**: a mix of two budgets, where a fixed set of
branches (every ``m``-th) takes the other budget's answer and cost, placing the mix within about a
point of its neighbour.

What it is not: a training sweep. The conditions are one model at different lengths, so their
gaps are mostly monotone in B and their per-question differences mostly of one sign; real
checkpoints also trade questions (better on some, worse on others). Its problems are 30 per
benchmark, as AIME's. Nothing of the files is shipped: benches and tests read them from
``$PARALLEL_PROBE_DATA`` or ``../shared/data/parallel-probe`` beside the checkout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pr1_eval.ingest.parallel_probe import NO_ANSWER, ProbeBranch, ProbeQuestion

#: Budgets of the default testbed (tokens; ``math.inf``: unlimited).
DEFAULT_BUDGETS = (2000, 4000, 6000, 8000, 12000, 16000, math.inf)
#: A near-tie takes every NEAR_TIE_EVERY-th branch from the budget below: about a tenth of their gap.
NEAR_TIE_EVERY = 11


@dataclass(frozen=True)
class Condition:
    """One checkpoint of the testbed: per question, every branch's verdict and cost (questions × branches)."""

    name: str
    correct: np.ndarray
    cost: np.ndarray

    @property
    def truth(self) -> np.ndarray:
        """Per question, the chance a draw is right (the mean over its branches)."""
        return np.asarray(self.correct.mean(axis=1))


def branch_answer(branch: ProbeBranch, interval: int, budget: float) -> tuple[str, int]:
    """(answer, cost) of one branch cut at ``budget`` tokens (rules in the module docstring)."""
    if branch.tokens <= budget:
        return branch.final_answer, branch.tokens
    probes = min(int(budget // interval), len(branch.probe_answers))
    answer = branch.probe_answers[probes - 1] if probes >= 1 else NO_ANSWER
    return answer, int(budget)


def budget_condition(questions: Sequence[ProbeQuestion], budget: float, name: str | None = None) -> Condition:
    """The condition "think at most ``budget`` tokens" over ``questions`` (all holding the same branch count)."""
    correct, cost = [], []
    for q in questions:
        cut = [branch_answer(b, q.probe_interval, budget) for b in q.branches]
        correct.append([answer == q.gold and answer != NO_ANSWER for answer, _ in cut])
        cost.append([c for _, c in cut])
    label = name or ("unlimited" if math.isinf(budget) else f"{budget / 1000:g}k")
    return Condition(label, np.array(correct, dtype=bool), np.array(cost, dtype=np.int64))


def mixed(first: Condition, second: Condition, every: int, name: str) -> Condition:
    """``first`` with every ``every``-th branch (0, every, 2·every, …) taken from ``second``."""
    take = (np.arange(first.correct.shape[1]) % every == 0)[None, :]
    return Condition(name, np.where(take, second.correct, first.correct), np.where(take, second.cost, first.cost))


def build_testbed(questions: Sequence[ProbeQuestion], budgets: Sequence[float] = DEFAULT_BUDGETS) -> list[Condition]:
    """The budget conditions, a duplicate of the middle one, and two near-ties.

    The near-ties: the top budget with every 11th branch from the next one down (12 of 128
    branches: about a tenth of their gap below the top), and the same for the next pair of budgets
    down. On the released files they sit 0.16 to 0.83 points below (≤ 1 point, as a near-tie
    should; every 10th put one 1.02 below).
    """
    base = [budget_condition(questions, b) for b in budgets]
    middle = base[len(base) // 2]
    out = [*base, Condition(f"{middle.name} (again)", middle.correct, middle.cost)]
    for top, below in ((base[-1], base[-2]), (base[-2], base[-3])):
        out.append(mixed(top, below, NEAR_TIE_EVERY, f"{top.name}+{below.name}/{NEAR_TIE_EVERY}"))
    return out


def draw(conditions: Sequence[Condition], samples: int, rng: np.random.Generator,
         resamples: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``resamples`` independent draws of ``samples`` answers per question of every condition, each
    condition from its own branches with replacement: (correct, cost), shaped
    (resamples × conditions × questions × samples)."""
    first = conditions[0].correct
    questions, branches = first.shape
    index = rng.integers(0, branches, size=(resamples, len(conditions), questions, samples))
    rows = np.arange(questions)[None, None, :, None]
    correct = np.stack([c.correct for c in conditions])  # conditions × questions × branches
    cost = np.stack([c.cost for c in conditions])
    which = np.arange(len(conditions))[None, :, None, None]
    return correct[which, rows, index], cost[which, rows, index]
