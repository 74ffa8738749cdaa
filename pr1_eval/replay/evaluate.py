"""Score a controller on recorded questions: accuracy, total tokens and sequential tokens.

The protocol is the Parallel-Probe authors' (``evaluation/data_loader.py: ModelandTask.evaluate``),
so their published rows are reproduced exactly:

* for each seed in ``seeds`` (theirs: 0–99) every question's branches are shuffled with that seed
  (:class:`~pr1_eval.replay.state.QuestionState`) and the controller answers it once;
* a question is **correct** when the reported answer equals the gold string exactly (their
  ``==``); :func:`replay` takes another ``match`` (e.g. pr1-eval's grader) as an option;
* **Cost** = mean over questions of the tokens charged to all branches; **Seq_Cost** = mean of the
  largest charge of one branch (branches run side by side), except for ESC, whose windows run one
  after another: the sum over windows of each window's largest charge;
* each seed gives a mean over questions; the row is the mean over seeds. Acc is printed as
  ``round(100 × mean, 2)``, Cost and Seq_Cost truncated to whole tokens (their ``int()``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pr1_eval.ingest.parallel_probe import ProbeQuestion
from pr1_eval.replay.controllers import EarlyStoppingConsistency
from pr1_eval.replay.state import QuestionState

#: The authors' seeds: their SC@64 and every other row average 100 shuffled branch orders.
AUTHORS_SEEDS = tuple(range(100))
Controller = Callable[[QuestionState], str | None]
Match = Callable[[str | None, str], bool]


def exact_match(answer: str | None, gold: str) -> bool:
    """The authors' verdict: the reported answer string equals the gold string."""
    return answer == gold


@dataclass(frozen=True)
class QuestionOutcome:
    """One controller's answer to one question under one seed, and what it cost."""

    question: int
    seed: int
    answer: str | None
    tokens: int
    sequential_tokens: int
    branches_started: int


@dataclass(frozen=True)
class ReplayResult:
    """Means over seeds of per-seed means over questions, plus the per-seed accuracies."""

    accuracy: float
    tokens: float
    sequential_tokens: float
    branches_started: float
    seed_accuracies: tuple[float, ...]

    @property
    def acc_percent(self) -> float:
        """Accuracy as the authors print it: percent, rounded to 2 decimals."""
        return round(100 * self.accuracy, 2)


def sequential_tokens(controller: Controller, charges: Sequence[int]) -> int:
    """The longest chain of tokens that had to be generated one after another."""
    if not charges:
        return 0
    if isinstance(controller, EarlyStoppingConsistency):
        w = controller.window
        return sum(max(charges[i:i + w]) for i in range(0, len(charges), w))
    return max(charges)


def answer_question(controller: Controller, question: ProbeQuestion, seed: int) -> QuestionOutcome:
    """Run ``controller`` on ``question`` with branch order ``seed``."""
    state = QuestionState(question, seed)
    answer = controller(state)
    charges = state.started_charges()
    return QuestionOutcome(question=question.index, seed=seed, answer=answer, tokens=sum(charges),
                           sequential_tokens=sequential_tokens(controller, charges), branches_started=len(charges))


def run_controller(controller: Controller, questions: Sequence[ProbeQuestion],
                   seeds: Sequence[int] = AUTHORS_SEEDS) -> list[QuestionOutcome]:
    """Every (seed, question) outcome, seed-major; the answers are scored by :func:`summarize`."""
    if not questions or not seeds:
        raise ValueError("replay needs at least one question and one seed")
    from pr1_eval.replay.batched import batched_outcomes  # numpy; the probe controllers' fast path

    per_question: list[list[QuestionOutcome]] = []
    for q in questions:
        batch = batched_outcomes(controller, q, seeds)
        per_question.append([answer_question(controller, q, seed) for seed in seeds] if batch is None else
                            [QuestionOutcome(q.index, seed, *outcome) for seed, outcome in zip(seeds, batch, strict=True)])
    return [outcomes[s] for s in range(len(seeds)) for outcomes in per_question]


def summarize(outcomes: Sequence[QuestionOutcome], questions: Sequence[ProbeQuestion],
              match: Match = exact_match) -> ReplayResult:
    """The row of a controller: per seed the means over questions, then the mean over seeds."""
    gold = {q.index: q.gold for q in questions}
    by_seed: dict[int, list[QuestionOutcome]] = {}
    for outcome in outcomes:
        by_seed.setdefault(outcome.seed, []).append(outcome)
    per_seed = []
    for group in by_seed.values():
        n = len(group)
        per_seed.append((sum(match(o.answer, gold[o.question]) for o in group) / n, sum(o.tokens for o in group) / n,
                         sum(o.sequential_tokens for o in group) / n, sum(o.branches_started for o in group) / n))
    s = len(per_seed)
    return ReplayResult(accuracy=sum(p[0] for p in per_seed) / s, tokens=sum(p[1] for p in per_seed) / s,
                        sequential_tokens=sum(p[2] for p in per_seed) / s,
                        branches_started=sum(p[3] for p in per_seed) / s,
                        seed_accuracies=tuple(p[0] for p in per_seed))


def replay(controller: Controller, questions: Sequence[ProbeQuestion], seeds: Sequence[int] = AUTHORS_SEEDS,
           match: Match = exact_match) -> ReplayResult:
    """The controller's accuracy and costs over ``questions``, averaged over ``seeds``."""
    return summarize(run_controller(controller, questions, seeds), questions, match)
