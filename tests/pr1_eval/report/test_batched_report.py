"""A run's report in one pass (every task from the run's columns converted once) against one task at a time.

The mixed run interleaves five tasks with different k: a complete one with unscored samples and a
sample without lengths, one with a short problem and a mixed length unit (incomplete: partial
numbers), one with a problem without gold (left out of the metrics), one of a single problem (no
intervals) and, with a run record, one declared but without samples. Problem ids sort differently as
text than as numbers (p10 < p2) and rows are shuffled, so a wrong split or order shows.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from pr1_eval.records.run import RunRecord, task_entry
from pr1_eval.report.completeness import check_completeness
from pr1_eval.report.run_report import run_report, task_report
from pr1_eval.report.schema import TaskMetrics, TaskReport
from tests.support.batched_fixtures import TASKS, mixed_frame


def assert_same(got: TaskReport, want: TaskReport, where: str) -> None:
    """Field by field, floats bit for bit (NaN equal to NaN)."""
    for field in dataclasses.fields(TaskReport):
        a, b = getattr(got, field.name), getattr(want, field.name)
        if isinstance(b, TaskMetrics):
            assert isinstance(a, TaskMetrics), f"{where}.{field.name}"
            for metric in dataclasses.fields(TaskMetrics):
                x, y = getattr(a, metric.name), getattr(b, metric.name)
                assert x == y or (isinstance(y, float) and math.isnan(y) and math.isnan(x)), \
                    f"{where}.{field.name}.{metric.name}: {x!r} != {y!r}"
        else:
            assert a == b, f"{where}.{field.name}: {a!r} != {b!r}"


def test_one_pass_equals_one_task_at_a_time_with_per_task_k() -> None:
    frame = mixed_frame()
    ks = {task: k for task, (k, _) in TASKS.items()}
    batched = run_report(frame, ks).tasks
    assert list(batched) == list(dict.fromkeys(frame["task"]))
    for task, k in ks.items():
        alone = run_report(frame[frame["task"] == task], k).tasks[task]
        assert_same(batched[task], alone, task)
    # the mix is really there: per-task k, an incomplete task's partial numbers, a mixed unit, no gold, unscored
    assert {t: r.k for t, r in batched.items()} == ks
    beta, gamma = batched["beta"], batched["gamma"]
    assert beta.metrics is None and beta.partial is not None and beta.n_problems == 2 and beta.partial.length_unit == "mixed"
    assert gamma.partial is not None and gamma.n_problems == 3 and "no gold" in str(gamma.incomplete_reason)
    alpha = batched["alpha"].metrics
    assert alpha is not None and alpha.n_unscored > 0 and alpha.ci95["mean"] is not None
    assert batched["solo"].metrics is not None and batched["solo"].metrics.ci95["mean"] is None


def test_one_pass_numbers_against_a_hand_count() -> None:
    frame = mixed_frame(3)
    report = run_report(frame, {task: k for task, (k, _) in TASKS.items()})
    alpha, gamma = report.tasks["alpha"].metrics, report.tasks["gamma"].partial
    rows = frame[frame["task"] == "alpha"]
    correct = rows["correct"].map(lambda v: v is True)
    by_problem = correct.groupby(rows["problem_id"]).mean()
    assert alpha is not None
    assert alpha.mean == float(np.mean([by_problem[p] for p in sorted(by_problem.index)]))
    assert alpha.n_unscored == int((~rows["grade_status"].isin(["ok", "no_answer"])).sum())
    assert alpha.truncated_ratio == float((rows["finish_reason"] == "length").mean())
    lengths = rows.dropna(subset=["response_length", "critical_path"])
    assert alpha.speedup == lengths["response_length"].sum() / lengths["critical_path"].sum()
    scored = frame[(frame["task"] == "gamma") & (frame["problem_id"] != "p3")]  # the no-gold problem left out
    assert gamma is not None and gamma.n_unscored == int((~scored["grade_status"].isin(["ok", "no_answer"])).sum())
    assert gamma.format_ok_ratio == float(scored["format_ok"].mean())


def test_one_pass_equals_one_task_at_a_time_against_a_run_record() -> None:
    frame = mixed_frame(1)
    declared = {task: task_entry(sorted(held) + (["p99"] if task == "beta" else []), k, version="1", source="test",
                                 data_hash=None) for task, (k, held) in TASKS.items() if task != "solo"}
    declared["empty"] = task_entry(["e1", "e2"], 2, version="1", source="test", data_hash=None)
    record = RunRecord(status="complete", k=None, tasks=declared)
    report = run_report(frame, run=record)
    checks = check_completeness(record, frame)
    assert list(report.tasks) == [*declared, "solo"]  # declared order, then undeclared samples
    for task, check in checks.tasks.items():
        assert_same(report.tasks[task], task_report(frame[frame["task"] == task], check), task)
    assert report.tasks["empty"].n_samples == 0 and report.tasks["empty"].partial is None
    assert report.tasks["beta"].n_missing_problems == 1 and not report.complete
