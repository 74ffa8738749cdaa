"""Metrics against independent computations (enumeration, the paper's own figure)."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pandas as pd
import pytest

from pr1_eval.metrics import bootstrap_ci, majority_correct, pass_at_k, pass_at_k_paper
from pr1_eval.records import SampleRecord
from pr1_eval.report import run_report


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
    value = float(np.mean([pass_at_k_paper(16, c, 16) for c in counts]))
    assert round(value * 100, 1) == 10.2


def test_paper_pass_is_bootstrap_best_of_k_expectation() -> None:
    rng = random.Random(0)
    samples = [True] * 3 + [False] * 13
    draws = [any(rng.choice(samples) for _ in range(16)) for _ in range(40000)]
    assert pass_at_k_paper(16, 3, 16) == pytest.approx(sum(draws) / len(draws), abs=0.01)


def test_majority_uses_answer_classes_and_ignores_missing() -> None:
    assert majority_correct([0, 0, 1, None, None, None], [True, True, False, False, False, False])
    assert not majority_correct([1, 0, 1], [False, True, False])
    assert not majority_correct([None, None], [False, False])


def test_bootstrap_ci_brackets_the_mean() -> None:
    values = [0.0, 0.25, 0.5, 1.0, 0.75, 0.0, 0.5]
    low, high = bootstrap_ci(values)  # type: ignore[misc]
    assert low < float(np.mean(values)) < high
    assert bootstrap_ci([0.5]) is None


def _frame(counts: dict[str, list[bool]], task: str = "t") -> pd.DataFrame:
    rows = []
    for pid, verdicts in counts.items():
        for i, ok in enumerate(verdicts):
            rec = SampleRecord(task=task, problem_id=pid, sample_idx=i, response="r", gold="1", correct=ok,
                               grade_status="ok", answer_class=0 if ok else 1, n_response_tokens=10 + i,
                               has_parallel=i % 2 == 0)
            rows.append(rec.to_row())
    return pd.DataFrame(rows)


def test_report_metrics_match_hand_computation() -> None:
    frame = _frame({"p1": [True, False, False, False], "p2": [True, True, True, False], "p3": [False] * 4})
    m = run_report(frame, k=4)["tasks"]["t"]
    assert m["mean@4"] == pytest.approx((1 / 4 + 3 / 4 + 0) / 3)
    assert m["pass@4"] == pytest.approx(2 / 3)
    assert m["pass@1"] == pytest.approx(m["mean@4"])
    assert m["pass@4_paper"] == pytest.approx((1 - 0.75**4 + 1 - 0.25**4) / 3)
    assert m["maj@4"] == pytest.approx(1 / 3)  # p2 majority correct; p1 majority wrong; p3 wrong
    assert m["parallel_ratio"] == pytest.approx(0.5)
    assert m["mean_response_tokens"] == pytest.approx(11.5)


def test_report_names_incomplete_problems_instead_of_averaging() -> None:
    frame = _frame({"p1": [True, False, False, False], "p2": [True, True]})
    m = run_report(frame, k=4)["tasks"]["t"]
    assert m["incomplete"] == {"p2": 2} and "mean@4" not in m
