"""A ``--limit`` run is marked as a slice on every surface that shows its numbers, with lm-eval's warning.

Before, a ``sweep --limit 4`` run read ``complete yes`` and was ranked beside full runs with no word
that it held the first 4 of 30 problems; ``run.json``'s ``limit`` was printed nowhere.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from analysis.leaderboard.board import build_leaderboard, compute_leaderboard
from analysis.leaderboard.page import leaderboard_html
from analysis.leaderboard.tables import render
from pr1_eval.report.completeness import LIMIT_MARK, LIMIT_SIZES_KEY, LIMIT_WARNING, check_run
from pr1_eval.report.load import load_report
from pr1_eval.report.table import format_report_table
from pr1_eval.store.run_store import RunStore
from tests.support.leaderboard_fixtures import write_counts_run

FULL = {"ta": {"a1": 4, "a2": 3, "a3": 0, "a4": 2}}
SLICE = {"ta": {"a1": 2, "a2": 1}}


def _limited(root: Path, name: str, limit: int, sizes: dict[str, int] | None) -> Path:
    """A run as ``--limit`` writes it: run.json's ``limit``, and (since it is recorded) each task's full size."""
    path = write_counts_run(root, name, SLICE, k=4)
    store = RunStore(path)
    record = store.read_run()
    extra = {**record.extra, **({LIMIT_SIZES_KEY: sizes} if sizes is not None else {})}
    store.write_run(dataclasses.replace(record, limit=limit, extra=extra))
    return path


def test_the_check_names_the_slice_with_and_without_recorded_sizes(tmp_path: Path) -> None:
    check = check_run(_limited(tmp_path, "new", 2, {"ta": 30}))
    assert check.complete and check.is_limited  # every declared sample is there: limited, not incomplete
    assert check.limit_lines() == ["ta: the first 2 of 30 problems (--limit 2)"]
    assert check.limit_label() == f"{LIMIT_MARK} 2"
    old = check_run(_limited(tmp_path, "old", 2, None))  # recorded before the sizes were: held == limit
    assert old.limit_lines() == ["ta: the first 2 problems (--limit 2)"]
    assert not check_run(_limited(tmp_path, "whole", 5, None)).is_limited  # 2 problems < --limit 5: nothing was cut
    assert not check_run(_limited(tmp_path, "fits", 2, {"ta": 2})).is_limited
    assert not check_run(write_counts_run(tmp_path, "full", FULL, k=4)).is_limited


def test_the_report_warns_and_marks_the_task(tmp_path: Path) -> None:
    report = load_report(_limited(tmp_path, "run", 2, {"ta": 30}))
    text = format_report_table(report)
    assert LIMIT_WARNING in text and "ta: the first 2 of 30 problems (--limit 2)" in text
    row = next(line for line in text.splitlines() if line.startswith("ta "))
    assert "2 --limit" in row
    doc = report.to_json()
    assert doc["complete"] is True and doc["limit"] == 2 and doc["limited"] == ["ta: the first 2 of 30 problems (--limit 2)"]
    full = format_report_table(load_report(write_counts_run(tmp_path, "full", FULL, k=4)))
    assert "LIMIT" not in full and "--limit" not in full


def test_the_leaderboard_marks_the_run_in_every_format(tmp_path: Path) -> None:
    runs = [write_counts_run(tmp_path, "full", FULL, k=4), _limited(tmp_path, "sliced", 2, {"ta": 30})]
    doc = build_leaderboard(runs, intersect=True)
    by_name = {r["name"]: r for r in doc["runs"]}
    assert by_name["sliced"]["limited"] == ["ta: the first 2 of 30 problems (--limit 2)"]
    assert by_name["full"]["limited"] == []
    assert any(LIMIT_WARNING in note and "sliced" in note for note in doc["notes"])
    json.dumps(doc)
    csv = render(doc, "csv").splitlines()
    assert "limited" in csv[0].split(",") and "ta: the first 2 of 30 problems (--limit 2)" in "\n".join(csv)
    for fmt in ("text", "markdown"):
        out = render(doc, fmt)
        assert f"sliced {LIMIT_MARK}" in out, fmt
        assert f"full {LIMIT_MARK}" not in out, fmt
    html = leaderboard_html(compute_leaderboard(runs, intersect=True))
    assert f"sliced {LIMIT_MARK}" in html and LIMIT_WARNING in html


def test_plan_records_full_sizes_and_warns(capsys: pytest.CaptureFixture[str]) -> None:
    from pr1_eval.generate.config import RunConfig
    from pr1_eval.generate.plan import plan_inputs, planned_record

    config = RunConfig(model="org/model", tasks=["aime24"], k=1, limit=3, data_source="packaged")
    inputs = plan_inputs(config)
    assert LIMIT_WARNING in capsys.readouterr().err
    record = planned_record(inputs, config, "name")
    assert record.limit == 3 and record.tasks["aime24"].n_problems == 3
    assert record.extra[LIMIT_SIZES_KEY] == {"aime24": 30}  # the packaged AIME 2024 has 30 problems


def test_the_dashboard_warns_on_every_page_and_marks_the_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboards.components import md_unescape
    from dashboards.data import MEMO
    from tests.support.app_harness import open_app, row, shown_table

    monkeypatch.setenv("PR1_LOADER_CACHE", str(tmp_path / "cache"))
    MEMO.clear()
    runs = [write_counts_run(tmp_path, "full", FULL, k=4), _limited(tmp_path, "sliced", 2, {"ta": 30})]
    try:
        app = open_app(monkeypatch, runs, "behaviour")
        warnings = [md_unescape(w.value) for w in app.warning]
        assert any(LIMIT_WARNING in w and "sliced" in w for w in warnings), warnings
        table = shown_table(app, 0)
        assert row(table, run="sliced", task="ta")["complete"] == f"yes {LIMIT_MARK}: the first 2 of 30 problems (--limit 2)"
        assert row(table, run="full", task="ta")["complete"] == "yes"
        app.switch_page("views/efficiency.py").run()
        assert any(LIMIT_WARNING in md_unescape(w.value) for w in app.warning)
    finally:
        MEMO.clear()


def test_analyze_names_the_slice_in_its_notes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pr1_eval.cli.main import main

    run = _limited(tmp_path, "sliced", 2, {"ta": 30})
    assert main(["analyze", str(run), "--no-embeddings", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    note = next(line for line in out.splitlines() if LIMIT_WARNING in line)
    assert f"1 run × task(s) hold only the first problems of their task, marked {LIMIT_MARK} (sliced)" in note
    assert any(LIMIT_WARNING in n for n in json.loads((tmp_path / "out" / "analysis.json").read_text())["notes"])
