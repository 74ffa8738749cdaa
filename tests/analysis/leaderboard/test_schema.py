"""The leaderboard document's typed parts write the keys the document has and read them back."""

from __future__ import annotations

from pathlib import Path

from analysis.leaderboard.board import build_leaderboard
from analysis.leaderboard.schema import SCHEMA_VERSION, LeaderboardDocument, RunAverage, TaskCell
from tests.support.leaderboard_fixtures import write_counts_run


def test_cells_and_averages_round_trip_through_the_document(tmp_path: Path) -> None:
    write_counts_run(tmp_path, "run-a", {"ta": {"a1": 4, "a2": 1}}, k=4, paper_counts={"ta": {"a1": 2}})
    write_counts_run(tmp_path, "run-b", {"ta": {"a1": 3, "a2": 0}}, k=4)
    doc = build_leaderboard([tmp_path])
    assert doc["schema_version"] == SCHEMA_VERSION == 2
    assert set(doc) == set(LeaderboardDocument.__annotations__)
    for run in doc["runs"]:
        raw = run["tasks"]["ta"]
        cell = TaskCell.from_json(raw)
        assert cell.to_json() == raw and list(cell.to_json()) == list(raw)  # same keys, same order
        assert raw["best@4_paper"] == cell.best_at_k_paper and raw["pass@4_ci95"] == list(cell.pass_at_k_ci95 or [])
        average = RunAverage.from_json(run["average"])
        assert average.to_json() == run["average"] and average.chosen.mean == run["average"]["mean@4"]
    a = TaskCell.from_json(doc["runs"][0]["tasks"]["ta"])
    # run-a's paper checker accepts 2 of a1's 4 samples and 1 of a2's: best@4 on those counts
    assert a.best_at_k_paper == (1 - (1 - 2 / 4) ** 4 + 1 - (1 - 1 / 4) ** 4) / 2
