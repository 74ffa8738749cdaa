"""The leaderboard page's columns: metrics named at the run's k are renamed at K from the report's
fields (never parsed back from the string), so runs of different k share columns."""

from __future__ import annotations

from typing import Any

from analysis.leaderboard.schema import Averages, RunAverage, TaskCell
from dashboards.tables import leaderboard_rows, metric_names


def _cell(k: int) -> dict[str, Any]:
    return TaskCell(k=k, n_problems=2, mean=0.5, ci95=(0.25, 0.75), pass_at_k=0.9, best_at_k_paper=0.8, maj_at_k=0.6,
                    parallel_ratio=None, n_samples=2 * k, pass_at_1=0.5, pass_at_k_ci95=(0.8, 1.0),
                    best_at_k=None, speedup=1.25).to_json()


def _average(k: int | None) -> dict[str, Any]:
    numbers = Averages(mean=0.5, pass_at_k=0.9, best_at_k_paper=0.8, maj_at_k=0.6, parallel_ratio=0.1)
    return RunAverage(convention="task_mean", k=k, n_tasks=2, n_problems=4, task_mean=numbers,
                      problem_weighted=numbers).to_json()


def _run(name: str, tasks: dict[str, int], k: int | None) -> dict[str, Any]:
    return {"rank": 1, "name": name, "step": None, "k": k, "tasks": {t: _cell(n) for t, n in tasks.items()},
            "average": _average(k), "tied_with_above": False}


def test_metric_names_come_from_the_report_fields() -> None:
    names = metric_names(16)
    assert names["mean@16"] == "mean@K" and names["best@16_paper"] == "best@K_paper"
    assert names["pass@16_ci95"] == "pass@K_ci95" and names["maj@16 ci95"] == "maj@K ci95"
    assert names["pass@1"] == "pass@1"  # a metric at a fixed k keeps its name
    assert "parallel_ratio" not in names and "mean@8" not in names


def test_runs_of_different_k_share_columns_and_a_mixed_run_keeps_its_own_names() -> None:
    document = {"runs": [_run("a", {"aime24": 16, "amc23": 16}, 16), _run("b", {"aime24": 8}, 8),
                         _run("mixed", {"aime24": 16, "amc23": 8}, None)]}
    frame = leaderboard_rows(document)
    row = frame[(frame["run"] == "b") & (frame["task"] == "aime24")].iloc[0]
    assert (row["mean@K"], row["pass@K"], row["best@K_paper"], row["pass@1"]) == (0.5, 0.9, 0.8, 0.5)
    assert row["pass@K_ci95"] == [0.8, 1.0] and row["ci95"] == [0.25, 0.75] and row["n_samples"] == 16
    average = frame[(frame["run"] == "a") & (frame["task"] == "average")].iloc[0]
    assert (average["mean@K"], average["maj@K"], average["n_tasks"]) == (0.5, 0.6, 2)
    mixed = frame[frame["run"] == "mixed"].set_index("task")
    assert mixed.loc["aime24", "mean@16"] == 0.5 and mixed.loc["amc23", "mean@8"] == 0.5
    assert mixed.loc["average", "mean@k"] == 0.5
    # a null metric is a column (best@K is null in every cell)
    assert "best@K" in frame and frame["best@K"].isna().all()
    assert not any("@16" in c or "@8" in c for c in frame[frame["run"] != "mixed"].dropna(axis=1, how="all"))
