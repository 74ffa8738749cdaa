"""``pr1-eval leaderboard runs/`` on a first-hour folder: runs on different tasks, ``--limit`` slices
and k are ranked group by group, every surface saying the same, and no flag is offered that cannot work.

Before the grouping the command exited 2 on this folder ("not comparable … pass --intersect"), and
on runs sharing no task it offered ``--intersect``, which then failed."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from analysis.leaderboard.board import NotComparable, build_leaderboard
from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from tests.support.leaderboard_fixtures import write_counts_run

SWEEP_100 = {"aime24": {"p1": 4, "p2": 0, "p3": 2}, "amc23": {"q1": 1, "q2": 3}}
SWEEP_200 = {"aime24": {"p1": 4, "p2": 4, "p3": 2}, "amc23": {"q1": 3, "q2": 3}}


def first_hour(root: Path) -> Path:
    """A sweep of two checkpoints, a --limit run on fewer problems, a fork-join run on another task
    and a killed run (declares 3 problems, holds 2)."""
    write_counts_run(root / "sweep", "s100", SWEEP_100, k=4, step=100, family="/ckpt/job")
    write_counts_run(root / "sweep", "s200", SWEEP_200, k=4, step=200, family="/ckpt/job")
    write_counts_run(root, "limited", {"aime24": {"p1": 1, "p2": 0}, "amc23": {"q1": 2}}, k=4, family="tiny")
    write_counts_run(root, "forkjoin", {"aime25": {"r1": 1, "r2": 0}}, k=2, family="tiny", decoding="forkjoin")
    write_counts_run(root, "killme", {"hmmt25": {"h1": 1, "h2": 0}}, k=2, family="tiny",
                     declared={"hmmt25": ["h1", "h2", "h3"]}, status="running")
    return root


def test_a_mixed_folder_is_ranked_by_group_on_every_surface(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = first_hour(tmp_path / "runs")
    assert main(["leaderboard", str(root), "--json"]) == 0  # was 2: "runs are not comparable"
    doc = json.loads(capsys.readouterr().out)
    assert doc["grouped"] is True and doc["intersect_helps"] is False
    (group,) = doc["groups"]
    assert group["runs"] == ["s100", "s200"] and group["title"] == "aime24 (3 problems), amc23 (2 problems); k=4"
    board = group["leaderboard"]
    # mean@4 by hand: s200 aime24 = (1 + 1 + .5) / 3, amc23 = (.75 + .75) / 2; task mean = (5/6 + 3/4) / 2
    best = board["runs"][0]
    assert best["name"] == "s200" and best["average"]["mean@4"] == pytest.approx((5 / 6 + 3 / 4) / 2)
    assert board["baseline"] == "s100" and {c["task"] for c in board["comparisons"]} == {"aime24", "amc23"}
    alone = {entry["name"]: entry["why"] for entry in doc["alone"]}
    assert alone == {"forkjoin": "shares no task with any other run",
                     "limited": "closest run s100: task aime24: run 'limited' has 2 problems, run 's100' has 3 "
                                "(0 held only by run 'limited', 1 only by run 's100': p3)"}
    limited = next(e for e in doc["alone"] if e["name"] == "limited")["leaderboard"]["runs"][0]["tasks"]
    assert limited["aime24"]["mean@4"] == pytest.approx(1 / 8) and limited["amc23"]["mean@4"] == 0.5
    (killed,) = doc["not_ranked"]
    assert killed["runs"] == ["killme"] and "incomplete" in killed["reason"]
    assert "--intersect cannot rank them together" in doc["reason"]

    assert main(["leaderboard", str(root)]) == 0
    text = capsys.readouterr().out
    assert main(["leaderboard", str(root), "--markdown"]) == 0
    markdown = capsys.readouterr().out
    for shown in (text, markdown.replace("\\", "")):  # Markdown escapes parentheses
        assert "Group 1: 2 runs on aime24 (3 problems), amc23 (2 problems); k=4" in shown
        assert "2 run(s) with nothing to compare against" in shown and "- killme: run killme is incomplete" in shown
        assert "forkjoin: shares no task with any other run" in shown
    assert main(["leaderboard", str(root), "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["group"], r["name"]) for r in rows][:2] == [("1", "s200"), ("1", "s100")]  # in rank order
    assert sorted((r["group"], r["name"]) for r in rows[2:]) == [("alone", "forkjoin"), ("alone", "limited"),
                                                                 ("not ranked", "killme")]
    assert float(rows[0]["aime24.mean@4"]) == pytest.approx(5 / 6)

    page = tmp_path / "leaderboard.html"
    assert main(["leaderboard", str(root), "--html", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert html.count("<h2>Group ") == 1 and "2 run(s) with nothing to compare against" in html
    assert "shares no task with any other run" in html and "killme" in html


def test_intersect_is_offered_only_where_it_can_work(tmp_path: Path) -> None:
    write_counts_run(tmp_path, "a", {"t": {"p1": 1, "p2": 2}}, k=4)
    write_counts_run(tmp_path, "fewer", {"t": {"p1": 1}}, k=4)
    write_counts_run(tmp_path, "other", {"u": {"p1": 1}}, k=4)
    with pytest.raises(NotComparable, match="Pass --intersect") as helps:
        build_leaderboard([tmp_path / "a", tmp_path / "fewer"])
    assert helps.value.intersect_helps
    build_leaderboard([tmp_path / "a", tmp_path / "fewer"], intersect=True)  # and it does work
    with pytest.raises(NotComparable, match="--intersect cannot help here") as cannot:
        build_leaderboard([tmp_path / "a", tmp_path / "other"])
    assert not cannot.value.intersect_helps and "Pass --intersect" not in str(cannot.value)
    with pytest.raises(Pr1EvalError, match="share no task"):
        build_leaderboard([tmp_path / "a", tmp_path / "other"], intersect=True)


def test_a_comparable_folder_is_still_one_leaderboard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_counts_run(tmp_path, "s100", SWEEP_100, k=4, step=100, family="/ckpt/job")
    write_counts_run(tmp_path, "s200", SWEEP_200, k=4, step=200, family="/ckpt/job")
    assert main(["leaderboard", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "grouped" not in doc and [r["name"] for r in doc["runs"]] == ["s200", "s100"]


def test_runs_without_the_asked_tasks_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = first_hour(tmp_path / "runs")
    assert main(["leaderboard", str(root), "--tasks", "aime24", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [g["runs"] for g in doc["groups"]] == [["s100", "s200"]]
    assert {g["leaderboard"]["tasks"][0] for g in doc["groups"]} == {"aime24"}  # cut to the asked task
    reasons = {tuple(n["runs"]): n["reason"] for n in doc["not_ranked"]}
    assert reasons[("forkjoin",)] == reasons[("killme",)] == "holds none of the tasks asked for (--tasks aime24)"
