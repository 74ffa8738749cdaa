"""Token latency through every surface, on runs with designed structure (known path lengths):
annotation → stored columns → report (table, --json) → leaderboard (JSON, text, Markdown, CSV, HTML)
→ step summary, and an old run read without rewriting. Expected numbers are counted here from the
raw text (whitespace tokens and regular expressions, no parser), or with numpy on the stored columns."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy import stats

from analysis.leaderboard.board import build_leaderboard, compute_leaderboard
from analysis.leaderboard.page import leaderboard_html
from analysis.leaderboard.tables import render
from analysis.runs.loader import load_runs
from analysis.summary import ANALYSIS_COLUMNS, analyze
from pr1_eval.cli.main import main
from pr1_eval.report.load import load_report
from pr1_eval.report.step_summary import step_summary
from pr1_eval.store.run_store import RunStore
from tests.support.analysis_fixtures import block, make_record, response, write_run

_BLOCK = re.compile(r"<Parallel>.*?</Parallel>", re.S)
_PATH = re.compile(r"<Path>.*?</Path>", re.S)


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


#: Per problem, its two samples: (text, correct). Path lengths in words are designed to differ.
DESIGN = {
    "p0": [(response("Think.", block([words(2), words(20)]), "So.", final="5"), True),
           (response("Plain answer without blocks."), False)],
    "p1": [(response("a", block([words(5), words(5), words(1)]), "b", block([words(9), words(3)])), True),
           (response("x", block([words(30), words(2)]), final="7"), False)],
    "p2": [(response(block([words(4), words(4)])), True), (response("Just text " * 10), True)],
}


def counted(text: str) -> tuple[int, int]:
    """(response tokens, critical-path tokens) by whitespace words and regexes over the raw text."""
    losing = 0
    for b in _BLOCK.finditer(text):
        sizes = [len(p.group(0).split()) for p in _PATH.finditer(b.group(0))]
        losing += sum(sizes) - max(sizes)
    total = len(text.split())
    return total, total - losing


def _records(scale: int = 1) -> list:
    records = []
    for pid, samples in DESIGN.items():
        for i, (text, right) in enumerate(samples):
            padded = text.replace("Think.", "Think. " + words(scale, "t")) if scale > 1 else text
            records.append(make_record("t", pid, i, padded, correct=right, tokens=True))
    return records


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    return (write_run(tmp_path, "run-a", _records(), step=10), write_run(tmp_path, "run-b", _records(40), step=20))


def _stored(run: Path) -> dict[str, np.ndarray]:
    """The stored columns, read straight from the parquet files (not through pr1-eval's reader)."""
    table = pq.read_table(run / "samples.parquet")
    return {c: np.asarray(table.column(c).to_pylist()) for c in ("problem_id", "response_length", "critical_path",
                                                                  "losing_path_length", "correct", "length_unit")}


def test_annotation_stores_the_counted_lengths(runs: tuple[Path, Path]) -> None:
    for record in RunStore(runs[0]).read_records():
        text = DESIGN[record.problem_id][record.sample_idx][0]
        total, critical = counted(text)
        assert (record.response_length, record.critical_path, record.length_unit) == (total, critical, "token")
        assert record.losing_path_length == total - critical


def test_report_figures_equal_numpy_on_the_counts(runs: tuple[Path, Path]) -> None:
    m = load_report(runs[0]).tasks["t"].metrics
    assert m is not None
    counts = {(pid, i): counted(text) for pid, samples in DESIGN.items() for i, (text, _) in enumerate(samples)}
    total = np.array([c[0] for c in counts.values()], float)
    critical = np.array([c[1] for c in counts.values()], float)
    right = np.array([DESIGN[pid][i][1] for pid, i in counts], bool)
    assert m.length_unit == "token"
    assert m.response_length_per_sample == pytest.approx(total.mean())
    assert m.critical_path_per_sample == pytest.approx(critical.mean())
    assert m.speedup == pytest.approx(total.sum() / critical.sum()) and total.sum() > critical.sum()
    assert m.losing_path_share == pytest.approx((total - critical).sum() / total.sum())
    assert m.speedup_correct == pytest.approx(total[right].sum() / critical[right].sum())
    assert m.speedup_wrong == pytest.approx(total[~right].sum() / critical[~right].sum())
    per_problem = [sum(counts[(p, i)][0] for i in (0, 1)) / sum(counts[(p, i)][1] for i in (0, 1)) for p in DESIGN]
    assert m.speedup_problem_median == pytest.approx(np.median(per_problem))
    assert m.speedup_problem_p90 == pytest.approx(np.quantile(per_problem, 0.9))
    # the interval: 10,000 resamples of the 3 problems (id order) drawn by default_rng(0), 1,000 at a time
    sums = np.array([[sum(counts[(p, i)][j] for i in (0, 1)) for j in (0, 1)] for p in sorted(DESIGN)], float)
    rng = np.random.default_rng(0)
    draws = np.concatenate([rng.integers(0, 3, size=(1000, 3)) for _ in range(10)])
    ratios = sums[draws, 0].sum(axis=1) / sums[draws, 1].sum(axis=1)
    tail = stats.norm.cdf(-math.sqrt(3 / 2) * stats.t.ppf(0.975, 2))  # the expanded tail at P = 3, by its definition
    assert m.speedup_ci95 == pytest.approx(tuple(np.quantile(ratios, [tail, 1 - tail])))


def test_report_table_and_json(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    m = load_report(runs[0]).tasks["t"].metrics
    assert m is not None and m.speedup is not None
    assert main(["report", str(runs[0])]) == 0
    out = capsys.readouterr().out
    assert "token latency" in out and f"{m.speedup:.2f}x" in out and "token" in out
    assert main(["report", str(runs[0]), "--json"]) == 0
    task = json.loads(capsys.readouterr().out)["tasks"]["t"]
    assert task["speedup"] == pytest.approx(m.speedup) and task["length_unit"] == "token"
    assert task["speedup_ci95"] == pytest.approx(list(m.speedup_ci95 or ()))


def test_leaderboard_speedups_equal_numpy_on_the_stored_columns(runs: tuple[Path, Path]) -> None:
    board = compute_leaderboard(list(runs))
    doc = board.document
    for row in doc["runs"]:
        stored = _stored(Path(row["path"]))
        cell = row["tasks"]["t"]
        expected = stored["response_length"].sum() / stored["critical_path"].sum()
        assert cell["speedup"] == pytest.approx(expected)
        assert row["average"]["speedup"] == pytest.approx(expected)  # one task: the average is its speedup
        assert cell["critical_path_per_sample"] == pytest.approx(stored["critical_path"].mean())
        assert cell["losing_path_share"] == pytest.approx(stored["losing_path_length"].sum()
                                                          / stored["response_length"].sum())
        right = stored["correct"].astype(bool)
        assert cell["speedup_correct"] == pytest.approx(stored["response_length"][right].sum()
                                                        / stored["critical_path"][right].sum())
        assert cell["length_unit"] == "token"
    speeds = {row["name"]: row["tasks"]["t"]["speedup"] for row in doc["runs"]}
    assert speeds["run-b"] < speeds["run-a"]  # run-b's long main line dilutes the same paths
    text, markdown, csv_text = render(doc, "text"), render(doc, "markdown"), render(doc, "csv")
    html = leaderboard_html(board)
    for speed in speeds.values():
        shown = f"{speed:.2f}x"
        assert shown in text and shown in markdown and shown in html
        assert repr(speed)[:10] in csv_text
    assert "critical path (tokens)" in text and "t.speedup_ci95.low" in csv_text.splitlines()[0]


def test_an_old_run_gets_character_lengths_on_read(tmp_path: Path) -> None:
    """A part written before the columns existed: read, not rewritten, with lengths counted in characters."""
    run = write_run(tmp_path, "old", _records())
    part = next((run / "samples.parquet").glob("part-*.parquet"))
    table = pq.read_table(part)
    pq.write_table(table.drop_columns(["critical_path", "response_length", "losing_path_length", "length_unit"]), part)
    before = part.read_bytes()
    for record in RunStore(run).read_records():
        text = DESIGN[record.problem_id][record.sample_idx][0]
        losing = sum(sum(s) - max(s) for s in ([len(p.group(0)) for p in _PATH.finditer(b.group(0))]
                                                for b in _BLOCK.finditer(text)))
        assert (record.response_length, record.critical_path) == (len(text), len(text) - losing)
        assert record.length_unit == "char" and record.position_unit == "token"  # honest: not tokens
    projected = RunStore(run).read_table(columns=["task", "critical_path"])
    assert projected.column_names == ["task", "critical_path"] and projected.column("critical_path").null_count == 0
    m = load_report(run).tasks["t"].metrics
    assert m is not None and m.length_unit == "char" and m.speedup is not None and m.speedup > 1
    assert build_leaderboard([run])["runs"][0]["tasks"]["t"]["length_unit"] == "char"
    assert part.read_bytes() == before


def test_step_summary_speedup() -> None:
    records = _records()
    pairs = [counted(r.response) for r in records]
    s = step_summary(records)
    assert s.speedup == pytest.approx(sum(p[0] for p in pairs) / sum(p[1] for p in pairs))
    assert s.critical_path_mean == pytest.approx(np.mean([p[1] for p in pairs])) and s.length_unit == "token"
    assert step_summary(records, tags_kept=False).speedup is None


def test_analyze_share_of_characters_in_paths_that_disagree_with_the_final_answer(tmp_path: Path) -> None:
    agree, other = "so the total is 5.", "so the total is 7."
    texts = [response("Think.", block([agree, other]), "Both checked.", final="5"),  # one path disagrees
             response("Think.", block([agree, agree]), final="5"),  # none does
             response("Think.", block([other, "no value here"]), final=None)]  # no final answer: none counted
    run = write_run(tmp_path, "r", [make_record("t", f"p{i}", 0, text, correct=True) for i, text in enumerate(texts)])
    analysis = analyze(load_runs([run], tokenizer=None, columns=ANALYSIS_COLUMNS))
    row = analysis.runs.set_index("task").loc["t"]
    assert row["disagreeing_path_share"] == pytest.approx(len(other) / sum(len(t) for t in texts))
    by_problem = analysis.responses.set_index("problem_id")
    assert by_problem.loc["p0", "disagreeing_path_chars"] == len(other)
    assert by_problem.loc["p1", "disagreeing_path_chars"] == 0 and by_problem.loc["p1", "path_chars"] == 2 * len(agree)
    assert by_problem["disagreeing_path_chars"].isna().tolist() == [False, False, True]
