"""``pr1-eval leaderboard``: every number against a reference computed by hand from known counts."""

from __future__ import annotations

import csv
import io
import itertools
import json
from math import comb
from pathlib import Path

import pytest

from analysis.leaderboard.board import build_leaderboard, compute_leaderboard
from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from pr1_eval.stats.paired import holm
from tests.support.leaderboard_fixtures import write_counts_run

K = 4
A = {"ta": {"a1": 4, "a2": 3, "a3": 0, "a4": 2}, "tb": {"b1": 1, "b2": 4}}
A_PAPER = {"ta": {"a1": 1}}  # the paper's checker accepts only 1 of a1's 4 samples
B = {"ta": {"a1": 2, "a2": 3, "a3": 1, "a4": 0}, "tb": {"b1": 0, "b2": 4}}


def exact_p(diffs: list[float], weights: list[float]) -> float:
    """Brute-force two-sided sign-flip p over all patterns (second implementation)."""
    observed = abs(sum(w * d for w, d in zip(weights, diffs, strict=True)))
    values = [abs(sum(s * w * d for s, w, d in zip(signs, weights, diffs, strict=True)))
              for signs in itertools.product((1, -1), repeat=len(diffs))]
    return sum(v >= observed - 1e-12 for v in values) / len(values)


def expected_cell(counts: dict[str, int], paper: dict[str, int] | None = None) -> dict[str, float]:
    c = list(counts.values())
    cp = [(paper or {}).get(pid, n) for pid, n in counts.items()]
    return {
        "mean@4": sum(c) / (K * len(c)),
        "pass@4": sum(1 - comb(K - x, K) / comb(K, K) for x in c) / len(c),
        "best@4_paper": sum(1 - (1 - x / K) ** K for x in cp) / len(cp),  # the paper's Pass@16: best@K, its checker
        "maj@4": sum(x > K / 2 for x in c) / len(c),  # a tie (2 right, 2 wrong) is not a majority: counted wrong
    }


@pytest.fixture
def two_runs(tmp_path: Path) -> Path:
    write_counts_run(tmp_path, "run-a", A, k=K, paper_counts=A_PAPER, block_every=2)
    write_counts_run(tmp_path, "run-b", B, k=K)
    return tmp_path


def test_per_task_metrics_averages_and_schema(two_runs: Path) -> None:
    doc = build_leaderboard([two_runs / "run-a", two_runs / "run-b"])
    assert [r["name"] for r in doc["runs"]] == ["run-a", "run-b"]  # A is better on average
    a = doc["runs"][0]
    for task in ("ta", "tb"):
        cell = a["tasks"][task]
        for key, value in expected_cell(A[task], A_PAPER.get(task)).items():
            assert cell[key] == pytest.approx(value), (task, key)
        assert cell["n_problems"] == len(A[task])
        assert cell["parallel_ratio"] == pytest.approx(0.5)  # samples 0 and 2 of 4 carry a block
        low, high = cell["ci95"]
        assert low <= cell["mean@4"] <= high
    ta, tb = 9 / 16, 5 / 8
    assert a["average"]["task_mean"]["mean@4"] == pytest.approx((ta + tb) / 2)
    assert a["average"]["problem_weighted"]["mean@4"] == pytest.approx((ta * 4 + tb * 2) / 6)
    assert a["average"]["mean@4"] == a["average"]["task_mean"]["mean@4"] and a["average"]["convention"] == "task_mean"
    assert set(doc) >= {"runs", "comparisons"} and doc["schema_version"] == 2  # 2: best@K_paper, the report's name
    assert set(a) >= {"name", "model", "step", "decoding", "tasks", "average"}
    assert [key for key in a["average"] if "@" in key] == ["mean@4", "pass@4", "best@4_paper", "maj@4"]
    assert set(a["tasks"]["ta"]) >= {"n_problems", "mean@4", "ci95", "pass@4", "best@4_paper", "maj@4", "parallel_ratio"}
    assert not any(key.startswith("pass@") and key.endswith("_paper") for key in a["tasks"]["ta"])  # one name per number
    assert set(doc["comparisons"][0]) >= {"run", "baseline", "task", "n_problems", "delta", "ci95", "p_value", "p_holm"}


def test_paired_comparisons_against_brute_force_and_holm(two_runs: Path) -> None:
    doc = build_leaderboard([two_runs / "run-a", two_runs / "run-b"], baseline="run-b")
    by_task = {c["task"]: c for c in doc["comparisons"]}
    assert set(by_task) == {"ta", "tb"} and all(c["run"] == "run-a" and c["baseline"] == "run-b" for c in by_task.values())
    diffs = {t: [(A[t][p] - B[t][p]) / K for p in A[t]] for t in A}
    for task, comparison in by_task.items():
        d = diffs[task]
        assert comparison["delta"] == pytest.approx(sum(d) / len(d))
        assert comparison["p_value"] == pytest.approx(exact_p(d, [1 / len(d)] * len(d)))
        assert comparison["n_problems"] == len(d)
        assert comparison["ci95"][0] <= comparison["delta"] <= comparison["ci95"][1]
    ps = [by_task["ta"]["p_value"], by_task["tb"]["p_value"]]
    assert [by_task["ta"]["p_holm"], by_task["tb"]["p_holm"]] == pytest.approx(holm(ps))
    # the tie test of row 2 uses the average's weights: 1/(2 tasks · n_task) per problem
    weights = [1 / 8] * 4 + [1 / 4] * 2
    all_diffs = diffs["ta"] + diffs["tb"]
    assert doc["runs"][1]["p_vs_above"] == pytest.approx(exact_p(all_diffs, weights))
    assert doc["runs"][1]["tied_with_above"] is (doc["runs"][1]["p_vs_above"] >= 0.05)


def test_identical_runs_are_tied_with_delta_zero_and_p_one(tmp_path: Path) -> None:
    write_counts_run(tmp_path, "one", A, k=K)
    write_counts_run(tmp_path, "two", A, k=K)
    doc = build_leaderboard([tmp_path])
    assert doc["runs"][1]["tied_with_above"] is True and doc["runs"][1]["p_vs_above"] == 1.0
    for comparison in doc["comparisons"]:
        assert (comparison["delta"], comparison["p_value"], comparison["p_holm"], comparison["ci95"]) == (0, 1, 1, [0, 0])


def test_right_everywhere_against_wrong_everywhere_gives_two_over_two_to_the_n(tmp_path: Path) -> None:
    problems = [f"p{i}" for i in range(10)]
    write_counts_run(tmp_path, "good", {"t": dict.fromkeys(problems, K)}, k=K)
    write_counts_run(tmp_path, "bad", {"t": dict.fromkeys(problems, 0)}, k=K)
    doc = build_leaderboard([tmp_path / "bad", tmp_path / "good"])
    assert doc["baseline"] == "bad"  # the first run given
    (comparison,) = doc["comparisons"]
    assert comparison["delta"] == 1.0 and comparison["p_value"] == 2 / 2**10 and comparison["ci95"] == [1.0, 1.0]
    assert [r["name"] for r in doc["runs"]] == ["good", "bad"] and doc["runs"][1]["tied_with_above"] is False


def test_default_baseline_of_a_sweep_is_its_lowest_step(tmp_path: Path) -> None:
    for step, shift in ((300, 1), (100, 0), (200, 2)):
        write_counts_run(tmp_path, f"s{step}", {"t": {f"p{i}": (i + shift) % (K + 1) for i in range(6)}}, k=K, step=step)
    doc = build_leaderboard([tmp_path / "s300", tmp_path / "s100", tmp_path / "s200"])
    assert doc["baseline"] == "s100" and {c["run"] for c in doc["comparisons"]} == {"s200", "s300"}
    assert build_leaderboard([tmp_path], baseline=str(tmp_path / "s300"))["baseline"] == "s300"
    with pytest.raises(Pr1EvalError, match="--baseline 'nope' is none of the loaded runs"):
        build_leaderboard([tmp_path], baseline="nope")


def test_mismatched_runs_are_refused_with_the_difference_named(tmp_path: Path) -> None:
    write_counts_run(tmp_path, "base", {"t": {"p1": 1, "p2": 2, "p3": 3}}, k=K)
    write_counts_run(tmp_path, "fewer", {"t": {"p1": 1, "p2": 2}}, k=K)
    with pytest.raises(Pr1EvalError, match=r"task t: run 'fewer' has 2 problems, run 'base' has 3 \(0 held only by "
                       r"run 'fewer', 1 only by run 'base': p3\).*--intersect"):
        build_leaderboard([tmp_path / "base", tmp_path / "fewer"])
    write_counts_run(tmp_path, "rehashed", {"t": {"p1": 1, "p2": 2, "p3": 3}}, k=K, data_hash="hash-v2")
    with pytest.raises(Pr1EvalError, match="data hash of rehashed"):
        build_leaderboard([tmp_path / "base", tmp_path / "rehashed"])
    write_counts_run(tmp_path, "k2", {"t": {"p1": 1, "p2": 2, "p3": 0}}, k=2)
    with pytest.raises(Pr1EvalError, match="task t: k differs: k2 has k=2, base has k=4"):
        build_leaderboard([tmp_path / "base", tmp_path / "k2"])
    write_counts_run(tmp_path, "other-task", {"u": {"p1": 1}}, k=K)
    with pytest.raises(Pr1EvalError, match="run other-task has no samples for it"):
        build_leaderboard([tmp_path / "base", tmp_path / "other-task"])


def test_intersect_compares_on_the_shared_problems_and_says_how_many(tmp_path: Path) -> None:
    write_counts_run(tmp_path, "base", {"t": {"p1": 0, "p2": 2, "p3": 3}, "u": {"q": 1}}, k=K)
    write_counts_run(tmp_path, "fewer", {"t": {"p1": 4, "p2": 2}}, k=K, data_hash=None)
    doc = build_leaderboard([tmp_path / "base", tmp_path / "fewer"], intersect=True)
    assert doc["tasks"] == ["t"]
    assert any("task t compared on 2 shared problems" in n for n in doc["notes"])
    assert any("task(s) u left out" in n for n in doc["notes"])
    assert any("data hash unknown for fewer / t" in n for n in doc["notes"])
    by_name = {r["name"]: r for r in doc["runs"]}
    assert by_name["base"]["tasks"]["t"]["mean@4"] == pytest.approx((0 + 2) / 8)  # p3 left out
    assert by_name["base"]["tasks"]["t"]["n_problems"] == 2
    (comparison,) = doc["comparisons"]
    assert comparison["n_problems"] == 2 and comparison["delta"] == pytest.approx(0.5)


def test_tasks_with_their_own_k(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the paper scores AIME with 16 samples and MATH with 1: an import can declare k per task
    counts_a, counts_b = {"aime": {"p1": 3, "p2": 1}, "math": {"m1": 1, "m2": 0}}, {"aime": {"p1": 1, "p2": 1}, "math": {"m1": 0, "m2": 0}}
    write_counts_run(tmp_path, "a", counts_a, k={"aime": 4, "math": 1})
    write_counts_run(tmp_path, "b", counts_b, k={"aime": 4, "math": 1})
    doc = build_leaderboard([tmp_path / "a", tmp_path / "b"])
    a = doc["runs"][0]
    assert a["name"] == "a" and a["k"] is None
    assert a["tasks"]["aime"]["mean@4"] == pytest.approx(4 / 8) and a["tasks"]["math"]["mean@1"] == pytest.approx(1 / 2)
    assert a["average"]["mean@k"] == pytest.approx((4 / 8 + 1 / 2) / 2) and a["average"]["k"] is None
    assert main(["leaderboard", str(tmp_path)]) == 0
    assert "avg mean@k" in capsys.readouterr().out


def test_incomplete_runs_are_left_out_and_unknown_tasks_refused(tmp_path: Path) -> None:
    write_counts_run(tmp_path, "done", {"t": {"p1": 1, "p2": 2}}, k=K)
    write_counts_run(tmp_path, "killed", {"t": {"p1": 1}}, k=K, status="running", declared={"t": ["p1", "p2"]})
    document = build_leaderboard([tmp_path / "done", tmp_path / "killed"], intersect=True)
    assert [r["name"] for r in document["runs"]] == ["done"] and document["runs"][0]["complete"] is True
    assert [(e["name"], e["complete"]) for e in document["excluded"]] == [("killed", False)]
    assert document["excluded"][0]["missing"][0] == "t: 1 of 2 problem(s) have no samples (p2)"
    assert document["runs"][0]["tasks"]["t"]["mean@4"] == (1 + 2) / (2 * K)  # done's own numbers, unchanged
    with pytest.raises(Pr1EvalError, match="run killed is incomplete on task t"):  # nothing complete is left
        build_leaderboard([tmp_path / "killed"])
    with pytest.raises(Pr1EvalError, match="--tasks zz: no loaded run has samples for it"):
        build_leaderboard([tmp_path / "done"], tasks=["zz"])
    with pytest.raises(Pr1EvalError, match="no run could be loaded"):
        build_leaderboard([tmp_path / "missing"])


def test_numbers_are_the_reports_and_per_problem_fractions_add_up(two_runs: Path) -> None:
    from pr1_eval.report.load import load_report

    board = compute_leaderboard([two_runs])
    report = load_report(two_runs / "run-a").tasks["ta"].metrics
    cell = {r["name"]: r for r in board.document["runs"]}["run-a"]["tasks"]["ta"]
    assert report is not None and cell["mean@4"] == report.mean and cell["pass@4"] == report.pass_at_k
    assert cell["best@4_paper"] == report.best_at_k_paper and cell["best@4"] == report.best_at_k  # the report's names
    fractions = board.per_problem[(board.per_problem["run"] == "run-a") & (board.per_problem["task"] == "ta")]
    assert fractions["fraction"].mean() == pytest.approx(cell["mean@4"])


def test_cli_formats(two_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["leaderboard", str(two_runs), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in doc["runs"]] == ["run-a", "run-b"]
    assert main(["leaderboard", str(two_runs), "--csv", "--average", "problem_weighted"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["name"] for r in rows] == ["run-a", "run-b"] and rows[0]["average.convention"] == "problem_weighted"
    assert float(rows[0]["ta.mean@4"]) == pytest.approx(9 / 16)
    assert main(["leaderboard", str(two_runs), "--markdown", "--tasks", "ta"]) == 0
    out = capsys.readouterr().out
    assert "| rank | run |" in out and "tb" not in out.split("### Per task")[1]
    assert main(["leaderboard", str(two_runs / "run-a"), str(two_runs / "nowhere")]) == 1  # named, the rest ranked
    assert "run not loaded" in capsys.readouterr().err
    assert main(["leaderboard", str(two_runs / "nowhere")]) == 2


def test_html_page_is_self_contained(two_runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "page" / "board.html"
    assert main(["leaderboard", str(two_runs), "--html", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.count("plotly.js v") == 1  # the library once, inline
    assert "<script src=" not in text and 'src="http' not in text  # nothing fetched: it opens offline
    assert "Which problems flip" in text and "fraction correct per problem" in text and "run-a" in text


def test_every_comparison_carries_its_minimum_detectable_effect(two_runs: Path) -> None:
    """run-b − run-a on ta: differences (2−4)/4, 0, 1/4, (0−2)/4 → SD (ddof 1) 0.375 (hand: squared
    deviations sum to 0.421875, over 3); no MDE: 4 problems can never reach p < 0.05 (the MDE's own
    formula, 2.80 · SD / √P, is checked by hand in tests/pr1_eval/report/test_variance.py)."""
    from analysis.leaderboard.tables import csv_rows, render

    doc = build_leaderboard([two_runs / "run-a", two_runs / "run-b"])
    ta = next(c for c in doc["comparisons"] if c["run"] == "run-b" and c["task"] == "ta")
    assert ta["diff_sd"] == pytest.approx(0.375)
    # 4 problems: the sign-flip test's smallest p is 2/16 > 0.05, so no effect is detectable (audit M19)
    assert all(c["mde"] is None for c in doc["comparisons"])
    text = render(doc, "text")
    assert "MDE" in text and "80% power" in text
    rows = {r["name"]: r for r in csv_rows(doc)}
    assert rows["run-b"]["ta.mde_vs_baseline"] is None and rows["run-a"]["ta.mde_vs_baseline"] is None
    # the cells carry the report's split of Var(mean@K): run-a on ta, p̂ = 1, 3/4, 0, 1/2
    cell = doc["runs"][0]["tasks"]["ta"]
    p = [1, 0.75, 0, 0.5]
    s2 = sum((x - sum(p) / 4) ** 2 for x in p) / 3
    assert cell["se"] == pytest.approx((s2 / 4) ** 0.5)
    assert cell["variance_between"] + cell["variance_within"] == pytest.approx(s2 / 4)
    assert cell["variance_within"] == pytest.approx(sum(x * (1 - x) / 3 for x in p) / 4 / 4)
    assert isinstance(cell["required_k"], int)
