"""The budget testbed: a branch cut at a budget, the conditions built from real trajectories, the draws."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from pr1_eval.ingest.parallel_probe import ProbeBranch, ProbeQuestion, read_parallel_probe
from pr1_eval.replay.budget_testbed import Condition, branch_answer, budget_condition, build_testbed, draw, mixed

DATA = Path(os.environ.get("PARALLEL_PROBE_DATA") or Path(__file__).resolve().parents[3] / ".." / "shared" / "data"
            / "parallel-probe")


def test_a_branch_cut_at_a_budget() -> None:
    probes = tuple(f"a{j}" for j in range(24))  # probe j: the answer after (j + 1) × 500 tokens
    long = ProbeBranch(probes, 12_040, "final")
    assert branch_answer(long, 500, 12_000) == ("a23", 12_000)  # the 12,000-token probe
    assert branch_answer(long, 500, 11_999) == ("a22", 11_999)
    assert branch_answer(long, 500, 13_000) == ("final", 12_040)  # finished within the budget: its own length
    assert branch_answer(long, 500, math.inf) == ("final", 12_040)
    assert branch_answer(long, 500, 400) == ("ERR", 400)  # no probe yet: no answer
    short = ProbeBranch(("x",), 30_000, "final")  # fewer probes than the budget reaches: the last one
    assert branch_answer(short, 500, 8_000) == ("x", 8_000)


def test_conditions_mixes_and_draws_by_hand() -> None:
    q = ProbeQuestion(0, "q", "7", 500, (ProbeBranch(("7",), 900, "7"), ProbeBranch(("ERR", "3"), 1_200, "7"),
                                          ProbeBranch(("1",), 400, "1"), ProbeBranch(("7", "7"), 5_000, "8")))
    c = budget_condition([q], 1_000)
    assert c.correct.tolist() == [[True, False, False, True]] and c.cost.tolist() == [[900, 1_000, 400, 1_000]]
    assert c.truth.tolist() == [0.5]
    other = budget_condition([q], math.inf)
    assert other.correct.tolist() == [[True, True, False, False]] and other.name == "unlimited"
    m = mixed(other, c, 2, "mix")  # branches 0 and 2 from c
    assert m.correct.tolist() == [[True, True, False, False]] and m.cost.tolist() == [[900, 1_200, 400, 5_000]]
    rng = np.random.default_rng(0)
    correct, cost = draw([c, Condition("all", np.ones((1, 4), bool), np.full((1, 4), 9))], 4_000, rng, 2)
    assert correct.shape == (2, 2, 1, 4_000) and correct[:, 1].all() and (cost[:, 1] == 9).all()
    assert abs(correct[:, 0].mean() - 0.5) < 0.02  # with replacement from its own branches


@pytest.mark.skipif(not DATA.is_dir(), reason="no Parallel-Probe trajectories beside the checkout ($PARALLEL_PROBE_DATA)")
def test_the_testbed_on_the_released_trajectories() -> None:
    conditions = build_testbed(read_parallel_probe(DATA / "Qwen3-8B-128__aime24.json").questions)
    means = {c.name: 100 * c.truth.mean() for c in conditions}
    assert len(conditions) == 10
    assert round(means["2k"], 2) == 14.24 and round(means["unlimited"], 2) == 75.70  # the 14 → 76 %
    assert means["8k (again)"] == means["8k"]
    ties = [(name, means[name.split("+")[0]] - value) for name, value in means.items() if "+" in name]
    assert len(ties) == 2 and all(0 < gap <= 1.0 for _, gap in ties)
    assert all(c.correct.shape == (30, 128) for c in conditions)
