"""The per-problem table of a report: the array form against one problem at a time."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pr1_eval.report.run_report import _problem_table, metrics_of
from pr1_eval.stats.metrics import majority_correct, majority_correct_per_problem


def random_problems(rng: np.random.Generator, n_problems: int) -> list[tuple[list[int | None], list[bool]]]:
    problems = []
    for _ in range(n_problems):
        n = int(rng.integers(1, 9))
        n_classes = int(rng.integers(1, 4))
        classes: list[int | None] = [None if rng.random() < 0.2 else int(rng.integers(-1, n_classes)) for _ in range(n)]
        problems.append((classes, [bool(rng.random() < 0.4) for _ in range(n)]))
    return problems


@pytest.mark.parametrize("seed", range(6))
def test_majority_per_problem_is_the_rule_one_problem_at_a_time(seed: int) -> None:
    rng = np.random.default_rng(seed)
    problems = random_problems(rng, 300)
    problems += [([None, None], [True, False]), ([3, 3, 1, 1], [True, False, True, False]),
                 ([3, 3, 1, 1], [True, True, False, False]), ([7], [False]), ([7], [True])]
    classes = [c for cs, _ in problems for c in cs]
    correct = np.array([ok for _, oks in problems for ok in oks])
    starts = np.cumsum([0] + [len(cs) for cs, _ in problems[:-1]])
    answered = np.array([c is not None for c in classes])
    got = majority_correct_per_problem(np.array([0 if c is None else c for c in classes]), answered, correct, starts)
    expected = [majority_correct(cs, oks) for cs, oks in problems]
    assert got.tolist() == expected and 0 < sum(expected) < len(expected)


def test_majority_per_problem_with_no_answer_at_all() -> None:
    got = majority_correct_per_problem(np.zeros(4, dtype=np.int64), np.zeros(4, dtype=bool), np.ones(4, dtype=bool),
                                       np.array([0, 2]))
    assert got.tolist() == [False, False]


def reference_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One group per problem, sorted by id, samples by index, each problem's rule on its own."""
    rows = []
    for pid, group in sorted(frame.groupby(frame["problem_id"].astype(str)), key=lambda item: item[0]):
        group = group.sort_values("sample_idx", kind="stable")
        ok = [bool(x) if x is not None and not pd.isna(x) else False for x in group["correct"]]
        ok_paper = [bool(x) if x is not None and not pd.isna(x) else False for x in group["correct_paper"]]
        classes = [None if pd.isna(c) else int(c) for c in group["answer_class"]]
        rows.append({"problem_id": pid, "n": len(group), "c": sum(ok), "c_paper": sum(ok_paper),
                     "maj": majority_correct(classes, ok)})
    return pd.DataFrame(rows)


def sample_frame(seed: int, nullable: bool) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for p in rng.permutation(40):
        for i in rng.permutation(int(rng.integers(1, 7))):
            cls = None if rng.random() < 0.15 else int(rng.integers(0, 3))
            verdict = None if nullable and rng.random() < 0.1 else bool(rng.random() < 0.5)
            rows.append({"problem_id": f"p{p:03d}", "sample_idx": int(i), "correct": verdict,
                         "correct_paper": bool(rng.random() < 0.5), "answer_class": cls})
    frame = pd.DataFrame(rows)
    if not nullable:
        frame["answer_class"] = frame["answer_class"].fillna(0).astype(int)
    return frame


@pytest.mark.parametrize(("seed", "nullable"), [(0, False), (1, True), (2, True), (3, False)])
def test_problem_table_matches_one_group_per_problem(seed: int, nullable: bool) -> None:
    frame = sample_frame(seed, nullable)
    got = _problem_table(frame)
    expected = reference_table(frame)
    assert got["problem_id"].tolist() == expected["problem_id"].tolist()
    for column in ("n", "c", "c_paper", "maj"):
        assert got[column].tolist() == expected[column].tolist(), column


def test_problem_table_of_no_samples_is_empty() -> None:
    frame = sample_frame(0, False).iloc[:0]
    assert _problem_table(frame).empty


def test_metrics_reuse_one_problem_value_per_distinct_problem() -> None:
    frame = sample_frame(4, False)
    frame = frame[frame.groupby("problem_id")["sample_idx"].transform("size") >= 2]
    frame = frame.assign(has_parallel=False, format_ok=True, n_response_tokens=10.0, finish_reason="stop",
                         grade_status="correct", engine_calls=1.0, critical_path_tokens=10.0)
    table = reference_table(frame)
    metrics = metrics_of(frame, 2)
    assert metrics.mean == float(np.mean([c / n for c, n in zip(table["c"], table["n"], strict=True)]))
    assert metrics.maj_at_k == float(np.mean(table["maj"].astype(float)))
