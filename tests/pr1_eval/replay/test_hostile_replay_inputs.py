"""Round six of the reliability audit on ``replay`` and the Parallel-Probe reader (M1, M2, M8-M11,
M15, M16, M20, M21): every hostile input gets one line (exit 2) naming what is wrong, or a row that
says what it did; none is a traceback, a hang, a silently changed number or a destroyed file.

The numbers each test expects are worked out by hand from the tiny files written here."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from pr1_eval.ingest.parallel_probe import read_parallel_probe
from pr1_eval.output_paths import check_output_target
from pr1_eval.replay.rows import read_authors_csv
from tests.support.probe_fixtures import write_trajectories


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """Run ``argv``; it must be refused in one line (exit 2) holding every needle."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    line = next(line for line in err if line.startswith("error:"))
    assert "internal error" not in line, line
    for needle in needles:
        assert needle in line, line
    return line


def _tiny(tmp_path: Path, name: str = "m__toyset.json", **kw: int) -> Path:
    return write_trajectories(tmp_path / name, questions=kw.get("questions", 2), branches=kw.get("branches", 8))


# M1: replay --html over a run's own files
def test_replay_html_never_writes_a_runs_own_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _tiny(tmp_path)
    run = tmp_path / "run"
    assert main(["import", str(source), "--format", "parallel-probe", "--out", str(run)]) == 0
    record = (run / "run.json").read_bytes()
    capsys.readouterr()
    _refused(["replay", str(run), "--controller", "sc@2", "--html", str(run / "run.json")], capsys,
             "run's own file")
    _refused(["replay", str(run), "--controller", "sc@2", "--html", str(run / "samples.parquet" / "x.html")], capsys,
             "run's own file")
    _refused(["replay", str(run), "--controller", "sc@2", "--html", ""], capsys, "is a folder")
    assert (run / "run.json").read_bytes() == record
    assert not (run / "samples.parquet" / "x.html").exists()


# M2: the atomic writer and a FIFO
def test_a_fifo_target_is_refused_and_stays_a_fifo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pr1_eval.store.safe_write import write_atomic

    fifo = tmp_path / "figure.html"
    os.mkfifo(fifo)
    _refused(["replay", str(_tiny(tmp_path)), "--controller", "sc@2", "--html", str(fifo)], capsys,
             "FIFO", "not a regular file")
    with pytest.raises(Pr1EvalError, match="FIFO"):
        write_atomic(fifo, "x")  # the writer itself, for every other caller
    with pytest.raises(Pr1EvalError, match="a character device"):
        check_output_target("/dev/null", "--html")  # the guard leaderboard --html and analyze share (nothing written)
    with pytest.raises(Pr1EvalError, match="run's own file"):
        check_output_target(tmp_path / "run" / "samples.parquet", "--out", folder=True)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


# M8-M10: controller values outside their range
@pytest.mark.parametrize(("spec", "needle"), [
    ("sc@inf", "'inf' is not a whole number"), ("sc@nan", "not a whole number"), ("sc@1e400", "not a whole number"),
    ("sc@1.5", "'1.5' is not a whole number"), ("sc@99999999", "outside 1..1,000,000"),
    ("esc@64:window=0", "window 0 is outside"), ("esc@64:window=nan", "not a whole number"),
    ("esc@64:window=8.5", "not a whole number"), ("esc@64:window=-8", "window -8 is outside"),
    ("probe@4:max_steps=1e12", "not a whole number"), ("probe@4:burst=2.5", "not a whole number"),
    ("probe@4:stable=0", "stable 0 is outside"), ("probe@4:stable=-1", "outside"),
    ("probe@4:stable=1e400", "not a whole number"), ("sac:burst=0", "burst 0 is outside"),
    ("sac:patience=-3", "outside"), ("asc@4:threshold=nan", "outside (0, 1)"),
    ("asc@4:threshold=-1", "outside (0, 1)"), ("asc@4:threshold=2", "outside (0, 1)"),
    ("sc@٣", "not a whole number"), ("probe@4:stable=3,stable=4", "given twice"),
])
def test_controller_values_outside_their_range_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            spec: str, needle: str) -> None:
    _refused(["replay", str(_tiny(tmp_path)), "--controller", spec, "--seeds", "2"], capsys, needle)


@pytest.mark.parametrize("spec", ["sc@9", "probe@200", "probe-all@200", "asc@9"])
def test_a_budget_above_the_branches_held_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     spec: str) -> None:
    _refused(["replay", str(_tiny(tmp_path)), "--controller", spec, "--seeds", "2"], capsys,
             "holds 8", "at most 8")


def test_default_rows_on_a_small_file_are_relabelled_and_said(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(_tiny(tmp_path)), "--seeds", "2", "--json"]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)
    assert [r["controller"] for r in rows] == ["sc@8", "esc@8", "asc@8", "sac", "sc+sac@8", "probe@8", "probe-all@8"]
    assert all(r["branches"] <= 8 for r in rows)
    assert "the default row sc@64 is replayed as sc@8" in captured.err


# M11: a repeated key in a trajectory file
@pytest.mark.parametrize("key", ["gold_answer", "each_branch"])
def test_a_repeated_key_is_refused_naming_it(tmp_path: Path, key: str) -> None:
    path = _tiny(tmp_path)
    text = path.read_text(encoding="utf-8")
    first = text.index(f'"{key}": ') + len(f'"{key}": ')
    value = json.loads(text)[0][key]
    path.write_text(text[:first] + json.dumps(value) + f', "{key}": ' + text[first:], encoding="utf-8")
    with pytest.raises(Pr1EvalError, match=f"key '{key}' appears twice"):
        read_parallel_probe(path)


# M20 and M21: a final answer that reads two ways; probes that outnumber the tokens
def _one_question(tmp_path: Path, branch: list[object]) -> Path:
    path = tmp_path / "m__mytask.json"
    path.write_text(json.dumps([{"question": "q", "gold_answer": "204", "probe_freq": 500,
                                 "each_branch": [branch]}]), encoding="utf-8")
    return path


def test_a_final_answer_with_a_line_break_is_refused(tmp_path: Path) -> None:
    with pytest.raises(Pr1EvalError, match="holds a line break"):
        read_parallel_probe(_one_question(tmp_path, [["204"], 3856, "999\nFinal Answer: 204"]))


def test_probe_answers_beyond_the_tokens_are_refused(tmp_path: Path) -> None:
    # 3,856 tokens probed every 500: at most ceil(3856 / 500) = 8 probes
    assert len(read_parallel_probe(_one_question(tmp_path, [["204"] * 8, 3856, "204"])).questions) == 1
    with pytest.raises(Pr1EvalError, match="9 probe answers, but a branch of 3,856 tokens .* at most 8"):
        read_parallel_probe(_one_question(tmp_path, [["204"] * 9, 3856, "204"]))


# M15: the authors' CSVs
HEADER = "Solver,Strategy,Acc,Cost,Seq_Cost,solver_n\n"


@pytest.mark.parametrize(("body", "needle"), [
    (HEADER + "MajorityVoteSolver,FullReadStrategy,80.1\n", "3 fields where the header has 6"),
    (HEADER + "MajorityVoteSolver,FullReadStrategy,abc,1,1,64\n", "column Acc: 'abc' is not a finite number"),
    (HEADER + "MajorityVoteSolver,FullReadStrategy,NaN,1,1,64\n", "column Acc: 'NaN' is not a finite number"),
    (HEADER.encode() + b"MajorityVoteSolver,FullReadStrategy,8\xff,1,1,64\n", "not UTF-8"),
    (HEADER, "with rows"),
])
def test_bad_authors_csvs_are_one_line(tmp_path: Path, body: str | bytes, needle: str) -> None:
    path = tmp_path / "m__toyset_raw.csv"
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    with pytest.raises(Pr1EvalError, match=needle.replace("(", r"\(")):
        read_authors_csv(path)


def test_an_authors_csv_linked_to_an_endless_file_is_read_with_a_bound(tmp_path: Path) -> None:
    path = tmp_path / "m__toyset_raw.csv"
    path.symlink_to("/dev/zero")
    with pytest.raises(Pr1EvalError, match="not a regular file"):
        read_authors_csv(path)
    big = tmp_path / "big__toyset_raw.csv"
    big.write_text(HEADER + "x" * (5 * 2**20), encoding="utf-8")
    with pytest.raises(Pr1EvalError, match="larger than 4 MiB"):
        read_authors_csv(big)


def test_two_matching_authors_rows_are_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _tiny(tmp_path)
    authors = tmp_path / "m__toyset_raw.csv"
    authors.write_text(HEADER + "MajorityVoteSolver,FullReadStrategy,50,10,5,8\n" * 2, encoding="utf-8")
    assert main(["replay", str(source), "--controller", "sc@8", "--seeds", "2", "--authors", str(authors),
                 "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)[0]["authors_acc"] is None
    assert "holds 2 rows for sc@8" in captured.err


# M16: a task name from a file name in the figure
def test_a_task_name_is_escaped_in_the_figure(tmp_path: Path) -> None:
    name = 'M__<a href="http:evil.example">T<b>X.json'
    source = write_trajectories(tmp_path / name, questions=2, branches=4)
    out = tmp_path / "f.html"
    assert main(["replay", str(source), "--controller", "sc@2", "--seeds", "2", "--html", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "&lt;a href=\\\"http:evil.example\\\"&gt;T&lt;b&gt;X" in page
    assert '<a href=\\"http:evil.example' not in page
