"""``report --at``: pass@K, best@K and maj@K at K ≤ n; maj@K against brute-force enumeration of every
K-subset under the report's own majority rule."""

from __future__ import annotations

import argparse
import itertools
import json
import random
from math import comb
from pathlib import Path

import pytest

from pr1_eval.cli.main import main
from pr1_eval.report.run_report import run_report
from pr1_eval.report.schema import TaskMetrics
from pr1_eval.report.table import format_at_table
from pr1_eval.stats.at_k import maj_at_k
from pr1_eval.stats.metrics import majority_correct
from tests.support.leaderboard_fixtures import write_counts_run
from tests.support.report_fixtures import run_record, verdict_frame


def _brute(classes: list[int | None], right: dict[int, bool], k: int) -> float:
    correct = [c is not None and right[c] for c in classes]
    subsets = list(itertools.combinations(range(len(classes)), k))
    return sum(majority_correct([classes[i] for i in s], [correct[i] for i in s]) for s in subsets) / len(subsets)


def _sizes(classes: list[int | None], right: dict[int, bool]) -> tuple[list[int], list[int], int]:
    held = [c for c in classes if c is not None]
    return ([held.count(c) for c in sorted(set(held)) if right[c]], [held.count(c) for c in sorted(set(held)) if not right[c]],
            classes.count(None))


def test_maj_at_k_equals_the_mean_over_every_subset() -> None:
    rng = random.Random(3)
    for _ in range(150):
        n = rng.randint(1, 9)
        classes = [rng.choice([None, 0, 1, 2, 3]) for _ in range(n)]
        right = {c: rng.random() < 0.4 for c in range(4)}
        for k in range(1, n + 1):
            assert maj_at_k(*_sizes(classes, right), k) == pytest.approx(_brute(classes, right, k), abs=1e-12)


def test_maj_at_k_by_hand() -> None:
    # 2 right, 2 wrong: of the 6 pairs one is both right; the 4 mixed pairs tie and count wrong
    assert maj_at_k([2], [2], 0, 2) == pytest.approx(1 / 6)
    # K = 1: the share of samples holding a right answer (a missing one never wins)
    assert maj_at_k([3], [1, 1], 2, 1) == pytest.approx(3 / 7)
    # K = n: the ordinary majority (3 right against 2 and 2)
    assert maj_at_k([3], [2, 2], 0, 7) == 1.0
    # 3 right, 3 wrong, K = 3: right wins when it holds 2 or 3: (C(3,2)·3 + 1) / C(6,3) = 10/20
    assert maj_at_k([3], [3], 0, 3) == pytest.approx((comb(3, 2) * 3 + 1) / comb(6, 3))
    with pytest.raises(ValueError, match="1 <= K <= n"):
        maj_at_k([1], [1], 0, 3)


def test_a_large_problem_is_fast_and_exact_at_k_n() -> None:
    """128 samples in 12 classes (the real trajectories' size), well under a second; K = 16 against
    a Monte Carlo mean over 4,000 seeded random 16-subsets (within 4 standard errors)."""
    right, wrong = [40, 3], [30, 20, 10, 8, 6, 4, 3, 2, 1, 1]
    values = [maj_at_k(right, wrong, 0, k) for k in (1, 4, 16, 64, 128)]
    assert values[0] == pytest.approx(43 / 128) and values[-1] == 1.0
    classes = [c for c, size in enumerate(right + wrong) for _ in range(size)]
    correct = [c < len(right) for c in classes]
    rng = random.Random(16)
    draws = [rng.sample(range(128), 16) for _ in range(4000)]
    hits = [majority_correct([classes[i] for i in d], [correct[i] for i in d]) for d in draws]
    share = sum(hits) / len(hits)
    assert abs(values[2] - share) < 4 * (share * (1 - share) / len(hits)) ** 0.5


def test_report_at_k_gives_pass_best_and_maj_and_names_the_skipped_ks() -> None:
    frame = verdict_frame({"a": [True, False, False, True], "b": [True, True, True, False], "c": [False] * 4})
    report = run_report(frame, run=run_record({"t": (["a", "b", "c"], 4)}), at=(8, 2, 4, 1))
    m = report.tasks["t"].metrics
    assert m is not None and [e.k for e in m.at] == [1, 2, 4]
    one, two, four = m.at
    assert one.pass_at_k == pytest.approx(m.mean) and one.best_at_k == pytest.approx(m.mean)
    assert (four.pass_at_k, four.best_at_k, four.maj_at_k) == pytest.approx((m.pass_at_k, m.best_at_k, m.maj_at_k))
    # pass@2 = mean of 1 − C(n−c, 2)/C(4, 2): a (c=2) 5/6, b (c=3) 1, c 0
    assert two.pass_at_k == pytest.approx((5 / 6 + 1 + 0) / 3)
    assert two.best_at_k == pytest.approx((0.75 + (1 - 0.25**2)) / 3)
    assert two.maj_at_k == pytest.approx((1 / 6 + 3 / 6 + 0) / 3)  # the fixture's answers: right = class 0
    low, high = two.ci95["maj_at_k"] or (None, None)
    assert low is not None and high is not None and low <= two.maj_at_k <= high
    assert four.mean_se == pytest.approx(m.variance.se if m.variance else None)
    table = format_at_table(report, (8, 2, 4, 1))
    assert "t: K = 8 above its 4 samples per problem" in table
    assert TaskMetrics.from_json(m.to_json(), 4) == m  # the at and variance keys read back
    assert "at" in m.to_json() and m.to_json()["at"][1]["maj@2"] == two.maj_at_k


def test_without_at_the_report_has_no_at_entries() -> None:
    frame = verdict_frame({"a": [True, False], "b": [True, True]})
    m = run_report(frame, k=2).tasks["t"].metrics
    assert m is not None and m.at == [] and m.to_json()["at"] == []


def test_the_at_option_refuses_what_is_not_a_list_of_positive_integers() -> None:
    from pr1_eval.cli.report import at_values

    assert at_values("1,4,16") == (1, 4, 16)
    for bad in ("0,4", "x", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="positive integers"):
            at_values(bad)


def test_the_report_command_prints_the_variance_and_at_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``pr1-eval report RUN --at 1,2,8``: the variance table by default, the at-K table on request, K = 8
    named as above the run's 4 samples; ``--json`` carries the same numbers."""
    run = write_counts_run(tmp_path, "run", {"t": {"p1": 4, "p2": 1, "p3": 2}}, k=4)
    assert main(["report", str(run)]) == 0
    plain = capsys.readouterr().out
    assert "Variance of mean@K" in plain and "At K" not in plain
    assert main(["report", str(run), "--at", "1,2,8"]) == 0
    text = capsys.readouterr().out
    assert "At K" in text and "t: K = 8 above its 4 samples per problem" in text
    assert main(["report", str(run), "--json", "--at", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)["tasks"]["t"]
    # pass@2 by hand: 1 − C(4−c, 2)/C(4, 2) for c = 4, 1, 2 → 1, 1/2, 5/6
    assert [entry["k"] for entry in doc["at"]] == [2] and doc["at"][0]["pass@2"] == pytest.approx((1 + 0.5 + 5 / 6) / 3)
    p = [1, 0.25, 0.5]
    s2 = sum((x - sum(p) / 3) ** 2 for x in p) / 2
    assert doc["variance"]["se"] == pytest.approx((s2 / 3) ** 0.5)
    # the these-problems interval by hand: mean ± 1.96·√(Σ p(1 − p)/(n − 1) / P²)
    within = sum(x * (1 - x) / 3 for x in p) / 9
    low, high = doc["variance"]["ci95_these_problems"]
    assert (low + high) / 2 == pytest.approx(sum(p) / 3) and (high - low) / 2 == pytest.approx(1.959964 * within ** 0.5)
    assert main(["report", str(run), "--json", "--at", "2,8"]) == 0  # K = 8 is named, not dropped
    full = json.loads(capsys.readouterr().out)
    assert [entry["k"] for entry in full["tasks"]["t"]["at"]] == [2]
    assert full["at_not_given"]["t"]["K"] == [8] and full["at_not_given"]["t"]["samples_per_problem"] == 4


def test_a_problem_stopped_before_k_contributes_the_plug_in_and_its_own_vote() -> None:
    """An adaptive run's problem with n < K: pass@K = best@K = 1 − (1 − c/n)^K, maj over its n samples."""
    from pr1_eval.stats.at_k import at_k_values

    values = at_k_values(4, 3, ([3], [1], 0), 16)  # one right answer held 3 times, one wrong once
    assert values == {"pass_at_k": 1 - 0.25 ** 16, "best_at_k": 1 - 0.25 ** 16, "maj_at_k": 1.0}
    tied = at_k_values(4, 2, ([2], [2], 0), 16)  # a 2-2 tie is not a right vote (the report's tie rule)
    assert tied["maj_at_k"] == 0.0 and tied["pass_at_k"] == 1 - 0.5 ** 16


def test_the_variance_table_never_shows_a_negative_variance_unexplained(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Three problems solved 2 of 4 times each: s² = 0 while the sampling noise is (1/4)/3 each, so the
    unbiased between-problem estimate is −1/12 (by hand) per problem: shown as 0 and marked, with the
    estimate and the reason; a task the model never solves says why its required k is 1."""
    run = write_counts_run(tmp_path, "run", {"same": {"p1": 2, "p2": 2, "p3": 2}, "zero": {"q1": 0, "q2": 0}}, k=4)
    assert main(["report", str(run)]) == 0
    text = capsys.readouterr().out
    table = text[text.index("Variance of mean@K"):]
    assert "0 †" in table and "-0.0" not in table.split("\n\n")[0]
    assert f"estimated at {-1 / 12 / 3:.6f} (< 0): not estimable with 3 problems" in table
    assert "zero: required k 1: every problem's samples all agree" in table
