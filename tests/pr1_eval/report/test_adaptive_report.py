"""The report of an adaptive run: problems that stopped early are complete and weigh c/n; a problem
whose run stopped before its rule was satisfied is short; the note says what the numbers are.

Values are computed by hand from the verdicts (rule: rounds of 4, k = 12, margin 1/2, alpha 0.05:
eight agreeing verdicts settle a problem, 7 of 8 do not; 11 of 12 would, but 12 is k anyway)."""

from __future__ import annotations

import dataclasses

import pytest

from pr1_eval.report.completeness import check_completeness
from pr1_eval.report.run_report import run_report
from pr1_eval.stats.sequential import StopRule
from tests.support.report_fixtures import run_record, verdict_frame

RULE = StopRule(max_k=12, round_size=4)
VERDICTS = {"easy": [True] * 8, "hard": [False] * 8, "mixed": [True, False, True] * 4,
            "nearly": [True] * 7 + [False] + [True, True, True, True]}


def _run(verdicts: dict[str, list[bool]]):  # type: ignore[no-untyped-def]
    record = dataclasses.replace(run_record({"t": (list(verdicts), 12)}), adaptive=RULE.to_dict())
    return record, verdict_frame(verdicts)


def test_problems_that_stopped_early_are_complete_and_weigh_their_own_share() -> None:
    record, frame = _run(VERDICTS)
    report = run_report(frame, run=record)
    task = report.tasks["t"]
    assert report.complete and task.complete and task.n_problems == 4
    assert task.metrics is not None
    assert task.metrics.mean == pytest.approx((1 + 0 + 8 / 12 + 11 / 12) / 4)
    # pass@12: unbiased where n = 12 (mixed: 1 - C(4,12)/C(12,12) = 1, nearly: 1), plug-in 1 - (1 - c/n)^12 where n = 8
    assert task.metrics.pass_at_k == pytest.approx((1 + 0 + 1 + 1) / 4)
    note = report.adaptive_note or ""
    assert "2 of 4 problems stopped before k" in note and "40 samples drawn where fixed k draws 48" in note
    assert "adaptive_note" in report.to_json()


def test_a_problem_short_of_what_its_rule_asks_is_incomplete() -> None:
    cut = {**VERDICTS, "mixed": VERDICTS["mixed"][:8], "nearly": VERDICTS["nearly"][:10]}
    record, frame = _run(cut)
    check = check_completeness(record, frame).tasks["t"]
    assert check.short_problems == {"mixed": 8, "nearly": 10}
    report = run_report(frame, run=record)
    assert not report.complete and report.tasks["t"].metrics is None
    partial = report.tasks["t"].partial
    assert partial is not None and partial.mean == pytest.approx(0.5)  # easy and hard only


def test_a_fixed_k_run_still_needs_k_samples_of_every_problem() -> None:
    record, frame = _run(VERDICTS)
    record = dataclasses.replace(record, adaptive=None)
    assert check_completeness(record, frame).tasks["t"].short_problems == {"easy": 8, "hard": 8}
    assert run_report(frame, run=record).adaptive_note is None
    assert "adaptive_note" not in run_report(frame, run=record).to_json()


def test_without_verdicts_the_samples_the_run_recorded_drawing_are_what_it_needs() -> None:
    """A reader that loads only the keys (no ``correct`` column) takes run.json's samples_drawn."""
    record, frame = _run(VERDICTS)
    keys = frame[["task", "problem_id", "sample_idx", "grade_status"]]
    assert check_completeness(record, keys).tasks["t"].short_problems == {"easy": 8, "hard": 8}  # nothing recorded
    drawn = {"t": {"easy": 8, "hard": 8, "mixed": 12, "nearly": 12}}
    record = dataclasses.replace(record, adaptive={**RULE.to_dict(), "samples_drawn": drawn})
    assert check_completeness(record, keys).tasks["t"].complete
    cut = keys[~((keys["problem_id"] == "mixed") & (keys["sample_idx"] >= 8))]
    assert check_completeness(record, cut).tasks["t"].short_problems == {"mixed": 8}
