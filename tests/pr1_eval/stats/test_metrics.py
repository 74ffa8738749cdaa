"""Metrics against independent computations (enumeration, the paper's own figure)."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pandas as pd
import pytest

from pr1_eval.report.run_report import run_report
from pr1_eval.report.table import format_report_table
from pr1_eval.stats.metrics import MAJ_TIE_RULE, best_at_k, expanded_tail, majority_correct, pass_at_k
from tests.support.report_fixtures import run_record, verdict_frame


def brute_pass_at_k(n: int, c: int, k: int) -> float:
    """Share of k-subsets of n samples (c correct) containing a correct one, by enumeration."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize(("n", "c", "k"), [(8, 0, 1), (8, 3, 1), (8, 3, 4), (8, 7, 2), (8, 8, 8), (10, 2, 5), (6, 1, 6)])
def test_pass_at_k_equals_enumeration(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_k_rejects_too_few_samples() -> None:
    with pytest.raises(ValueError, match="at least 16"):
        pass_at_k(8, 1, 16)


def test_paper_pass16_reproduces_base_model_aime25_figure() -> None:
    counts = [2, 2, 1, 1] + [0] * 26
    value = float(np.mean([best_at_k(16, c, 16) for c in counts]))
    assert round(value * 100, 1) == 10.2


def test_paper_pass_is_bootstrap_best_of_k_expectation() -> None:
    rng = random.Random(0)
    samples = [True] * 3 + [False] * 13
    draws = [any(rng.choice(samples) for _ in range(16)) for _ in range(40000)]
    assert best_at_k(16, 3, 16) == pytest.approx(sum(draws) / len(draws), abs=0.01)


def test_majority_uses_answer_classes_and_ignores_missing() -> None:
    assert majority_correct([0, 0, 1, None, None, None], [True, True, False, False, False, False])
    assert not majority_correct([1, 0, 1], [False, True, False])
    assert not majority_correct([None, None], [False, False])


@pytest.mark.parametrize(("classes", "correct", "expected"), [
    ([0, 1], [True, False], False),  # a 1-1 tie with one right answer: not decided, counted wrong
    ([1, 0], [False, True], False),  # the same samples in the other order: the same verdict
    ([0, 0, 1, 1, 2], [True, True, False, False, False], False),  # a 2-2 tie beside a minority answer
    ([0, 1, 0, 1], [True, True, True, True], True),  # every tied answer is right (two forms of the gold)
    ([None, 0, 1, None, 1, 0, 2], [False, True, False, False, False, True, False], False),
    ([1, 0, 0], [False, True, True], True),  # a clear majority, seen second
    ([2, 2, 0, None, None, None], [False, False, True, False, False, False], False),  # no-answers never win
])
def test_majority_ties_follow_the_stated_rule_in_any_order(classes: list[int | None], correct: list[bool],
                                                           expected: bool) -> None:
    assert majority_correct(classes, correct) is expected
    for order in itertools.permutations(range(len(classes))):
        assert majority_correct([classes[i] for i in order], [correct[i] for i in order]) is expected


def test_maj_tie_rule_is_stated_in_the_report() -> None:
    report = run_report(verdict_frame({"p1": [True, True, False, False]}), k=4)  # answer classes 0, 0, 1, 1: a tie
    assert report.tasks["t"].metrics.maj_at_k == 0.0
    assert report.maj_tie_rule == MAJ_TIE_RULE and "every tied answer is correct" in MAJ_TIE_RULE
    assert MAJ_TIE_RULE in format_report_table(report)


def test_report_metrics_match_hand_computation() -> None:
    frame = verdict_frame({"p1": [True, False, False, False], "p2": [True, True, True, False], "p3": [False] * 4},
                   paper={"p1": [False] * 4, "p2": [True, False, False, False], "p3": [False] * 4})
    task = run_report(frame, k=4).tasks["t"]
    assert task.complete and task.k == 4 and task.n_problems == 3 and task.partial is None
    m = task.metrics
    assert m is not None
    assert m.mean == pytest.approx((1 / 4 + 3 / 4 + 0) / 3)
    assert m.pass_at_k == pytest.approx(2 / 3)
    assert m.pass_at_1 == pytest.approx(m.mean)
    assert m.best_at_k == pytest.approx((1 - 0.75**4 + 1 - 0.25**4) / 3)
    assert m.mean_paper == pytest.approx((0 + 1 / 4 + 0) / 3)  # the paper's checker: one hit on p2
    assert m.best_at_k_paper == pytest.approx((1 - 0.75**4) / 3)
    assert m.maj_at_k == pytest.approx(1 / 3)  # p2 majority correct; p1 majority wrong; p3 wrong
    assert m.parallel_ratio == pytest.approx(0.5)
    assert m.mean_response_tokens == pytest.approx(11.5)
    data = task.to_json()  # the --json names of those fields
    assert [data[key] for key in ("mean@4", "pass@1", "pass@4", "best@4", "maj@4", "mean@4_paper", "best@4_paper")] == [
        m.mean, m.pass_at_1, m.pass_at_k, m.best_at_k, m.maj_at_k, m.mean_paper, m.best_at_k_paper]
    assert set(data["ci95"]) == {"mean@4", "pass@4", "best@4", "maj@4", "mean@4_paper", "best@4_paper"}
    assert "pass@4_paper" not in data and "mean_paper" not in data  # renamed: the old name applied the paper's estimator to math-verify


def test_best_at_k_on_paper_verdicts_reproduces_the_papers_pass16_column() -> None:
    """best@16_paper is what the paper's tables report as Pass@16 (VERL's best@16 on its checker)."""
    counts = {f"p{i}": [j < c for j in range(16)] for i, c in enumerate([2, 2, 1, 1] + [0] * 26)}
    frame = verdict_frame({pid: [False] * 16 for pid in counts}, paper=counts)  # math-verify says no, the checker yes
    m = run_report(frame, k=16).tasks["t"].metrics
    assert m is not None and round(m.best_at_k_paper * 100, 1) == 10.2 and m.best_at_k == 0.0
    assert m.name("best_at_k_paper") == "best@16_paper"


def test_uneven_samples_are_named_and_not_averaged() -> None:
    frame = verdict_frame({"p1": [True, False, False, False], "p2": [True, True]})
    report = run_report(frame, k=4)
    m = report.tasks["t"]
    assert not m.complete and not report.complete
    assert m.short_problems == {"p2": 2} and m.metrics is None and "mean@4" not in m.to_json()
    assert m.partial is not None and m.partial.mean == pytest.approx(0.25)  # over p1, the one problem with all 4 samples
    assert m.to_json()["partial"]["mean@4"] == m.partial.mean
    assert m.incomplete_reason is not None and "p2: 2" in m.incomplete_reason


def test_problems_missing_from_run_json_declaration_make_the_task_incomplete() -> None:
    """A run killed after 2 of 5 problems: every stored problem is perfect, the task is not."""
    frame = verdict_frame({"a0": [True] * 4, "a1": [True] * 4})
    record = run_record({"t": (["a0", "a1", "a2", "a3", "a4"], 4), "never": (["n0", "n1"], 4)}, status="running")
    report = run_report(frame, run=record)
    t, never = report.tasks["t"], report.tasks["never"]
    assert not report.complete and report.status == "running"
    assert not t.complete and t.missing_problems == ["a2", "a3", "a4"] and t.n_problems_expected == 5
    assert t.metrics is None and t.partial is not None and t.partial.mean == 1.0
    assert not never.complete and never.missing_problems == ["n0", "n1"] and never.n_samples == 0
    assert never.partial is None and never.to_json()["partial"] is None
    assert any("status is 'running'" in line for line in report.incomplete)
    assert report.advice is not None and "rerun the run's command" in report.advice
    table = format_report_table(report)
    assert "t*" in table and "never*" in table and "2/5" in table
    assert "3 of 5 problem(s) have no samples (a2, a3, a4)" in table


def test_complete_run_declared_in_run_json_has_per_task_k() -> None:
    frame = pd.concat([verdict_frame({"a": [True] * 4 + [False] * 12, "b": [False] * 16}, task="aime24"),
                       verdict_frame({"m1": [True], "m2": [False], "m3": [True]}, task="math300_pr1")])
    record = run_record({"aime24": (["a", "b"], 16), "math300_pr1": (["m1", "m2", "m3"], 1)})
    report = run_report(frame, run=record)
    assert report.complete and report.k is None and report.incomplete == []
    aime, math = report.tasks["aime24"], report.tasks["math300_pr1"]
    assert aime.k == 16 and aime.metrics is not None and aime.metrics.mean == pytest.approx(4 / 16 / 2)
    assert math.k == 1 and math.metrics is not None and math.metrics.mean == pytest.approx(2 / 3)
    assert math.metrics.pass_at_1 == pytest.approx(2 / 3)
    assert math.to_json()["mean@1"] == math.metrics.mean and aime.to_json()["mean@16"] == aime.metrics.mean


def test_table_shows_intervals_unscored_and_integer_tokens() -> None:
    frame = verdict_frame({"p1": [True, False, False, False], "p2": [True, True, True, False], "p3": [False] * 4})
    frame.loc[0, "grade_status"] = "timeout"
    report = run_report(frame, k=4)
    table = format_report_table(report)
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["task", "k", "problems", "samples"]
    low, high = report.tasks["t"].metrics.interval("mean")
    row = lines[1].split()
    assert row[0] == "t" and f"[{low:.3f}," in lines[1] and f"{high:.3f}]" in lines[1]
    tail = next(i for i, line in enumerate(lines) if line.split()[-1:] == ["unscored"])  # the part that ends the row
    assert lines[tail].split()[0] == "task" and max(len(line) for line in lines[:tail + 2]) <= 120
    row = lines[tail + 1].split()
    assert row[0] == "t" and row[-2] == "12" and row[-1] == "1"  # mean tokens 11.5 rounds to 12; one unscored sample
    assert not table.startswith("\n")


def test_parallel_ratio_is_pooled_over_samples_and_refuses_nonsense() -> None:
    from pr1_eval.stats.metrics import parallel_ratio

    assert parallel_ratio(3, 12) == 0.25 and parallel_ratio(0, 4) == 0.0
    for n_parallel, n in ((1, 0), (5, 4), (-1, 4)):
        with pytest.raises(ValueError):
            parallel_ratio(n_parallel, n)


def test_problem_values_are_each_metrics_share_of_one_problem() -> None:
    from pr1_eval.stats.metrics import PER_PROBLEM_METRICS, problem_values

    values = problem_values(8, 3, 1, False, 4)
    assert tuple(values) == PER_PROBLEM_METRICS
    assert values == pytest.approx({"mean": 3 / 8, "pass_at_1": 3 / 8, "pass_at_k": brute_pass_at_k(8, 3, 4),
                                    "best_at_k": 1 - (5 / 8) ** 4, "maj_at_k": 0.0, "mean_paper": 1 / 8,
                                    "best_at_k_paper": 1 - (7 / 8) ** 4})


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.2])
def test_the_expanded_tail_is_scipy_stats_student_t_and_normal(alpha: float) -> None:
    """The special functions it calls give scipy.stats' t quantile and normal CDF, from 2 problems to many;
    by hand at P = 30: 1.88 % each side, and α/2 below 2 problems."""
    from scipy import stats

    for n in [2, 3, 5, 30, 31, 500, 9999]:
        by_stats = float(stats.norm.cdf(-np.sqrt(n / (n - 1)) * stats.t.ppf(1 - alpha / 2, n - 1)))
        assert expanded_tail(n, alpha) == pytest.approx(by_stats, rel=1e-12)
    assert expanded_tail(30) == pytest.approx(0.0188, abs=5e-5)
    assert expanded_tail(1, alpha) == alpha / 2

