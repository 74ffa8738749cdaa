"""Text tables fit a 120-column terminal (the report's was ~190 columns, the leaderboard's ~200,
analyze's structure table ~330) and every cell stays readable: a wide table is cut into parts
that repeat the row's names, and analyze prints one word, ``null``, for every missing value."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.leaderboard.board import build_leaderboard
from analysis.leaderboard.tables import render
from analysis.pipeline.output import _show
from pr1_eval.report.run_report import run_report
from pr1_eval.report.table import fit_columns, format_report_table
from tests.support.leaderboard_fixtures import write_counts_run
from tests.support.report_fixtures import verdict_frame


def test_fit_columns_cuts_a_wide_table_into_parts_that_repeat_the_keys() -> None:
    rows = [["run", "task", *(f"metric{i}" for i in range(12))], ["a", "t", *(f"{i}.{'0' * 12}" for i in range(12))]]
    lines = fit_columns(rows, keys=2, width=60)
    assert max(map(len, lines)) <= 60
    parts = [lines[i:i + 2] for i in range(0, len(lines), 3)]  # header, row, blank
    assert len(parts) > 1 and all(head.split()[:2] == ["run", "task"] and row.split()[:2] == ["a", "t"]
                                  for head, row in parts)
    shown = [cell for head, row in parts for cell in zip(head.split()[2:], row.split()[2:], strict=True)]
    assert shown == list(zip(rows[0][2:], rows[1][2:], strict=True))  # every column once, in order
    assert fit_columns(rows, keys=2, width=1000) == ["  ".join([rows[0][0].ljust(3), *(
        h.rjust(max(len(h), len(c))) for h, c in zip(rows[0][1:], rows[1][1:], strict=True))]).rstrip(),
        "  ".join([rows[1][0].ljust(3), *(c.rjust(max(len(h), len(c))) for h, c in zip(
            rows[0][1:], rows[1][1:], strict=True))]).rstrip()]  # narrow enough: one table, as before


def test_report_and_leaderboard_tables_fit_120_columns(tmp_path: pytest.TempPathFactory) -> None:
    frame = pd.concat([verdict_frame({"p1": [True, False] * 8, "p2": [False] * 16}, task=f"task-{n}") for n in range(2)])
    table = format_report_table(run_report(frame, k=16)).split("\n95% CI")[0]  # the table, in its parts
    assert max(len(line) for line in table.splitlines()) <= 120 and "unscored" in table and "mean@16 [95% CI]" in table
    for step in (100, 200):
        write_counts_run(tmp_path, f"seen-step{step}-sequential-k16-seed0",  # type: ignore[operator]
                         {t: {f"{t}-{i}": (i + step // 100) % 17 for i in range(5)} for t in ("aime24", "aime25", "amc23")},
                         k=16, step=step, block_every=2)
    text = render(build_leaderboard([tmp_path]), "text")
    tables = [line for line in text.splitlines() if line.startswith(("rank", "run", "1 ", "=2", "2 ", "seen-"))]
    assert tables and max(map(len, tables)) <= 120
    assert "first block rel. pos. (characters)" in text and "first block (" not in text


def test_analyze_prints_null_for_every_missing_value(capsys: pytest.CaptureFixture[str]) -> None:
    table = pd.DataFrame({"run": ["a", "b"], "task": ["t", "t"], "x": [None, 0.5], "y": [np.nan, 1.0],
                          "z": pd.array([None, 3], dtype="Int64"), "w": ["char", None]})
    _show("T", table, ["run", "task", "x", "y", "z", "w"])
    out = capsys.readouterr().out
    assert "None" not in out and "<NA>" not in out and "nan" not in out
    assert out.splitlines()[3].split() == ["a", "t", "null", "null", "null", "char"]  # after a blank line and the title
    assert out.splitlines()[4].split() == ["b", "t", "0.5000", "1.0000", "3", "null"]
