"""The batched replays (every seed at once) give what the step-for-step controllers give:
the same answer, tokens, sequential tokens and branches for every seed, on random questions made
to hit its corners (ties in the vote, branches with no probe, probes that overshoot the branch,
pruning of every branch, all branches finishing, a step cap)."""

from __future__ import annotations

import random

import pytest

from pr1_eval.ingest.parallel_probe import ProbeBranch, ProbeQuestion
from pr1_eval.replay.batched import batched_outcomes
from pr1_eval.replay.controllers import ConvergenceProbe, MajorityVote
from pr1_eval.replay.evaluate import answer_question, run_controller
from pr1_eval.replay.probe import ParallelProbe, ParallelProbeAllVote


def random_question(rng: random.Random, branches: int, index: int = 0) -> ProbeQuestion:
    interval = rng.choice([50, 100])
    vocabulary = [str(v) for v in range(rng.randint(1, 4))]
    made = []
    for _ in range(branches):
        probes = tuple(rng.choice(vocabulary) for _ in range(rng.randint(0, 12)))
        tokens = rng.randint(1, interval * (len(probes) + 2))  # below, at and past the probes' reach
        made.append(ProbeBranch(probes, tokens, rng.choice([*vocabulary, "ERR"])))
    return ProbeQuestion(index=index, question=f"q{index}", gold="1", probe_interval=interval, branches=tuple(made))


CONTROLLERS = [
    ParallelProbe(branches=6, stable=3, patience=2, warm_up=1, burst=1, max_steps=20),
    ParallelProbe(branches=5, stable=4, patience=1, warm_up=0, burst=2, max_steps=7),
    ParallelProbe(branches=4, stable=50, patience=3, warm_up=2, burst=3, max_steps=100),
    ParallelProbe(branches=1, stable=2, patience=1, warm_up=0, burst=1, max_steps=5),
    ParallelProbeAllVote(branches=6, stable=3, patience=2, warm_up=1, max_steps=20),
    ParallelProbeAllVote(branches=5, stable=50, patience=1, warm_up=0, max_steps=100),
    ParallelProbeAllVote(branches=3, stable=2, patience=4, warm_up=3, max_steps=4),
    MajorityVote(5),
    MajorityVote(9),  # more than some questions have: the rest read nothing, as when branches run out
    MajorityVote(4, ConvergenceProbe(patience=2)),
    MajorityVote(6, ConvergenceProbe(patience=3, warmup_steps=2, burst=2)),
    MajorityVote(1, ConvergenceProbe()),
]


@pytest.mark.parametrize("controller", CONTROLLERS, ids=repr)
def test_batched_equals_step_for_step_on_random_questions(controller: object) -> None:
    rng = random.Random(sum(map(ord, repr(controller))))
    seeds = list(range(12))
    budget = getattr(controller, "branches", None) or controller.n  # type: ignore[attr-defined]
    for trial in range(25):
        q = random_question(rng, branches=rng.randint(max(1, budget - 2), budget + 3), index=trial)
        if isinstance(controller, ParallelProbe | ParallelProbeAllVote) and len(q.branches) < budget:
            continue
        batch = batched_outcomes(controller, q, seeds)
        assert batch is not None
        reference = [answer_question(controller, q, seed) for seed in seeds]
        assert batch == [(o.answer, o.tokens, o.sequential_tokens, o.branches_started) for o in reference], trial


def test_outside_its_form_the_step_for_step_path_answers() -> None:
    q = random_question(random.Random(1), branches=3)
    assert batched_outcomes(ParallelProbe(branches=4), q, [0]) is None  # more branches than the question has
    assert batched_outcomes(ParallelProbe(branches=2, stable=2.5), q, [0]) is None  # type: ignore[arg-type]
    assert batched_outcomes(object(), q, [0]) is None
    assert batched_outcomes(MajorityVote(3, lambda state: "1"), q, [0]) is None  # a rule it does not know


def test_run_controller_keeps_the_seed_major_order() -> None:
    rng = random.Random(5)
    questions = [random_question(rng, 4, index=i) for i in range(3)]
    controller = ParallelProbe(branches=3, stable=2, patience=1, warm_up=0)
    outcomes = run_controller(controller, questions, [4, 9])
    assert [(o.seed, o.question) for o in outcomes] == [(4, 0), (4, 1), (4, 2), (9, 0), (9, 1), (9, 2)]
    assert outcomes == [answer_question(controller, q, s) for s in (4, 9) for q in questions]
