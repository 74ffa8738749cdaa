"""The issue's killed run through ``analyze`` (tables, ``--json``, figures), the loader and the
leaderboard: marked where its numbers appear, left out of trends and rankings unless asked, and
nothing counts a sample of a problem its run.json does not declare. Every expected number is
counted by hand from :mod:`completeness_fixtures`' counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.common.completeness import MARK, completeness_frame, loaded_completeness
from analysis.leaderboard.board import build_leaderboard
from analysis.runs.loader import load_runs
from analysis.summary import analyze
from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from pr1_eval.store.run_store import RunStore
from tests.support.completeness_fixtures import (
    AIME,
    AMC,
    KILLED_ACCURACY,
    KILLED_HELD,
    K,
    write_killed_run,
    write_sweep,
)
from tests.support.leaderboard_fixtures import sample, write_counts_run


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    write_sweep(tmp_path / "runs")
    return tmp_path / "runs"


def test_the_completeness_table_marks_the_killed_run_and_its_never_started_task(sweep: Path) -> None:
    frame = loaded_completeness(load_runs(sweep, tokenizer=None)).set_index(["run", "task"])
    assert frame["complete"].to_dict() == {
        ("killed", "aime24"): False, ("killed", "amc23"): False,
        **{(f"step{s}", t): True for s in (100, 200, 300) for t in ("aime24", "amc23")}}
    killed = frame.loc[("killed", "aime24")]
    assert killed["n_problems_held"] == len(KILLED_HELD) and killed["n_problems_expected"] == len(AIME)
    assert f"{len(AIME) - len(KILLED_HELD)} of {len(AIME)} problem(s) have no samples" in killed["missing"]
    assert "run status is 'running'" in killed["missing"]
    assert frame.loc[("killed", "amc23"), "n_problems_held"] == 0
    assert f"{len(AMC)} of {len(AMC)} problem(s) have no samples" in frame.loc[("killed", "amc23"), "missing"]
    assert frame.loc[("step100", "aime24"), "missing"] == ""


def test_analyze_json_marks_the_killed_run_and_keeps_it_out_of_the_drift(sweep: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(sweep), "--json", "--out", str(tmp_path / "out"), "--no-embeddings"]) == 0
    document = json.loads(capsys.readouterr().out)
    rows = {(r["run"], r["task"]): r for r in document["runs"]}
    killed = rows[("killed", "aime24")]
    assert killed["complete"] is False and "6 of 10 problem(s) have no samples" in killed["missing"]
    assert killed["n_samples"] == len(KILLED_HELD) * K  # shown, on what it holds
    never = rows[("killed", "amc23")]  # the task that never started is there, not vanished
    assert never["complete"] is False and never["n_samples"] == 0 and never["parallel_ratio"] is None
    assert all(rows[(f"step{s}", t)]["complete"] is True for s in (100, 200, 300) for t in ("aime24", "amc23"))
    assert any(MARK in note and "killed" in note for note in document["notes"])
    assert any("--include-incomplete includes it" in note for note in document["notes"])
    analysis = analyze(load_runs(sweep, tokenizer=None))
    assert sorted(analysis.drift_points["step"].astype(int).unique()) == [100, 200, 300]  # 250 left out
    accuracy = analysis.drift_trends.set_index(["task", "metric"]).loc[("aime24", "accuracy")]
    assert accuracy["spearman_rho"] == pytest.approx(1.0) and accuracy["n_steps"] == 3  # 1/4, 2/4, 3/4


def test_include_incomplete_lets_the_killed_step_into_the_drift(sweep: Path) -> None:
    analysis = analyze(load_runs(sweep, tokenizer=None), include_incomplete=True)
    points = analysis.drift_points.set_index(["task", "step"])
    assert points.loc[("aime24", 250), "accuracy"] == KILLED_ACCURACY and not points.loc[("aime24", 250), "complete"]
    assert bool(points.loc[("aime24", 100), "complete"])
    accuracy = analysis.drift_trends.set_index(["task", "metric"]).loc[("aime24", "accuracy")]
    # steps 100, 200, 250, 300 (ranks 1-4) against accuracies .25, .5, 0, .75 (ranks 2, 3, 1, 4):
    # d = -1, -1, 2, 0, so rho = 1 - 6·Σd²/(n(n²-1)) = 1 - 36/60 = 0.4
    assert accuracy["n_steps"] == 4 and accuracy["spearman_rho"] == pytest.approx(1 - 6 * (1 + 1 + 4 + 0) / 60)


def test_analyze_tables_show_the_mark_and_a_sentence(sweep: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(sweep), "--out", str(tmp_path / "out"), "--no-embeddings"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.strip().startswith("killed")]
    assert len(lines) >= 2 and all(MARK in line for line in lines[:2])
    assert "2 run × task row(s) lack samples their run.json declares" in out
    assert "pass --include-incomplete to include them" in out


def test_a_sample_of_an_undeclared_problem_is_dropped_and_said(tmp_path: Path) -> None:
    path = write_counts_run(tmp_path, "extra", {"t": {"p1": 4, "p2": 0}}, k=K)
    RunStore(path).append([sample("t", "stray", 0, True), sample("u", "q", 0, True)])
    loaded = load_runs(path, tokenizer=None)
    assert sorted(loaded.samples["problem_id"].unique()) == ["p1", "p2"] and len(loaded.samples) == 2 * K
    assert any("2 sample(s) of 2 problem(s) run.json does not declare left out" in n and "t/stray" in n
               for n in loaded.notes)
    frame = completeness_frame(loaded.completeness).set_index("task")
    assert not frame.loc["t", "complete"] and "stray" in frame.loc["t", "missing"]
    assert not frame.loc["u", "complete"] and "does not declare this task" in frame.loc["u", "missing"]
    analysis = analyze(loaded)
    row = analysis.runs.set_index("task").loc["t"]
    assert row["n_samples"] == 2 * K and row["accuracy"] == 0.5  # p1 4/4, p2 0/4: the stray right answer not counted


def test_the_leaderboard_ranks_complete_runs_and_names_the_killed_one(sweep: Path) -> None:
    document = build_leaderboard(sweep)
    assert [r["name"] for r in document["runs"]] == ["step300", "step200", "step100"]
    assert all(r["complete"] is True and r["missing"] == [] for r in document["runs"])
    (excluded,) = document["excluded"]
    assert excluded["name"] == "killed" and excluded["complete"] is False
    assert any("aime24" in line and "6 of 10" in line for line in excluded["missing"])
    assert any("killed" in note and "include_incomplete" in note for note in document["notes"])


def test_the_leaderboard_ranks_the_killed_run_on_request_marked(sweep: Path) -> None:
    with pytest.raises(Pr1EvalError, match="not comparable"):  # 4 of 10 problems: not the same problems
        build_leaderboard(sweep, include_incomplete=True)
    document = build_leaderboard(sweep, include_incomplete=True, intersect=True)
    killed = next(r for r in document["runs"] if r["name"] == "killed")
    assert killed["complete"] is False and killed["missing"] and killed["rank"] == 4
    assert killed["tasks"]["aime24"]["mean@4"] == KILLED_ACCURACY and document["excluded"] == []


def test_only_incomplete_runs_are_refused(tmp_path: Path) -> None:
    write_killed_run(tmp_path)
    with pytest.raises(Pr1EvalError, match="run killed is incomplete on task aime24"):
        build_leaderboard(tmp_path)


def test_an_import_killed_after_its_last_sample_is_incomplete_on_every_surface(tmp_path: Path,
                                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Every sample is stored, but run.json still says 'importing' (killed before its last write):
    report, leaderboard and the analysis' completeness table give the one verdict: incomplete."""
    rows = [{"task": "t", "problem_id": f"p{p}", "sample_idx": 0, "gold": "1", "response": "Final Answer: 1"}
            for p in range(2)]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for name in ("done", "killed"):
        assert main(["import", str(source), "--out", str(tmp_path / "runs" / name), "--grade-workers", "0"]) == 0
    record = json.loads((tmp_path / "runs" / "killed" / "run.json").read_text(encoding="utf-8"))
    (tmp_path / "runs" / "killed" / "run.json").write_text(json.dumps({**record, "status": "importing"}),
                                                           encoding="utf-8")
    capsys.readouterr()
    assert main(["report", str(tmp_path / "runs" / "killed"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    said = "run status is 'importing', not 'complete': the import was stopped before it finished"
    assert report["complete"] is False and report["incomplete"] == [said]
    assert main(["leaderboard", str(tmp_path / "runs"), "--json"]) == 0
    board = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in board["runs"]] == ["done"]
    assert [(e["name"], e["missing"]) for e in board["excluded"]] == [("killed", [said])]
    frame = loaded_completeness(load_runs(tmp_path / "runs", tokenizer=None)).set_index(["run", "task"])
    assert frame["complete"].to_dict() == {("done", "t"): True, ("killed", "t"): False}
