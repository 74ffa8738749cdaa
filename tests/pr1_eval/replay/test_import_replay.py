"""A trajectory file read, imported as a run and replayed: the run replays to the file's numbers.

The files are synthetic (the released trajectories carry no license and are never copied here);
``bench/bench_replay.py`` checks the released ones against the authors' published table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from pr1_eval.ingest.parallel_probe import read_parallel_probe
from pr1_eval.replay.evaluate import replay
from pr1_eval.replay.sources import load_sources
from pr1_eval.replay.specs import DEFAULT_SPECS, parse_spec
from tests.support.probe_fixtures import write_trajectories


def test_an_imported_run_replays_to_the_numbers_of_its_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write_trajectories(tmp_path / "tiny-model__toyset.json")
    assert main(["import", str(source), "--format", "parallel-probe", "--out", str(tmp_path / "run")]) == 0
    (from_run,), (from_file,) = load_sources([str(tmp_path / "run")]), load_sources([str(source)])
    assert from_run.task == from_file.task == "toyset" and from_run.model == "tiny-model"
    for text in DEFAULT_SPECS:
        controller = parse_spec(text.replace("64", "16")).controller
        a, b = replay(controller, from_run.questions, range(5)), replay(controller, from_file.questions, range(5))
        assert (a.accuracy, a.tokens, a.sequential_tokens) == (b.accuracy, b.tokens, b.sequential_tokens), text
    report = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    assert report["trajectories"]["answers_only"] is True and report["trajectories"]["branches_per_question"] == 16


def test_replay_command_prints_every_controller_and_compares_with_the_authors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write_trajectories(tmp_path / "m__toyset.json")
    authors = tmp_path / "matrix_results_m__toyset_raw.csv"
    expected = replay(parse_spec("sc@16").controller, read_parallel_probe(source).questions, range(100))
    authors.write_text("Solver,Strategy,Acc,Cost,Seq_Cost,solver_n\n"
                       f"MajorityVoteSolver,FullReadStrategy,{expected.acc_percent},{int(expected.tokens)},"
                       f"{int(expected.sequential_tokens)},16.0\n", encoding="utf-8")
    assert main(["replay", str(source), "--controller", "sc@16", "--controller", "probe@16:stable=3",
                 "--authors", str(authors), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["controller"] for r in rows] == ["sc@16", "probe@16:stable=3"]
    assert rows[0]["acc"] == rows[0]["authors_acc"] == expected.acc_percent
    assert rows[1]["authors_acc"] is None  # the CSV has no Parallel-Probe row
    assert main(["replay", str(source), "--controller", "esc@16:window=4", "--html", str(tmp_path / "f.html")]) == 0
    assert "accuracy against tokens" in (tmp_path / "f.html").read_text(encoding="utf-8")


def test_the_authors_columns_match_ours_in_format_say_equal_and_name_their_rows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The newcomer compared ``80.3`` with ``80.30`` by eye in 63 cells and read the authors' class
    names only in the docs: now both sides print alike, a column says ``equal`` (or the
    differences), and the names print under the table."""
    source = write_trajectories(tmp_path / "m__toyset.json")
    questions = read_parallel_probe(source).questions
    sc = replay(parse_spec("sc@16").controller, questions, range(100))
    sac = replay(parse_spec("sac").controller, questions, range(100))
    authors = tmp_path / "matrix_results_m__toyset_raw.csv"
    authors.write_text("Solver,Strategy,Acc,Cost,Seq_Cost,solver_n\n"
                       f"MajorityVoteSolver,FullReadStrategy,{sc.acc_percent},{int(sc.tokens)},"
                       f"{int(sc.sequential_tokens)},16.0\n"
                       f"GreedySolver,ConvergenceProbeStrategy,{sac.acc_percent + 0.5},{int(sac.tokens) + 35},"
                       f"{int(sac.sequential_tokens) + 35},\n", encoding="utf-8")
    argv = ["replay", str(source), "--controller", "sc@16", "--controller", "sac", "--controller", "esc@16",
            "--authors", str(authors)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    sc_line = next(line for line in lines if " sc@16 " in line)
    assert sc_line.split()[2] == sc_line.split()[7] == f"{sc.acc_percent:.2f}"  # ours and theirs, 2 decimals
    assert sc_line.split()[3] == sc_line.split()[8] == f"{int(sc.tokens):,}"
    assert sc_line.rstrip().endswith("equal")
    sac_line = next(line for line in lines if " sac " in line)
    assert sac_line.split()[7] == f"{sac.acc_percent + 0.5:.2f}"
    assert sac_line.rstrip().endswith("differs")
    assert next(line for line in lines if " esc@16 " in line).rstrip().endswith("—")
    notes = " ".join(captured.out.split("\n\n", 1)[1].split())  # the lines under the table, unwrapped
    assert "vs authors: 1 of 2 compared rows equal the authors'" in notes
    assert "toyset sac differs from the authors: Δacc -0.50 pp, Δtokens -35, Δsequential -35" in notes
    assert ("sc = MajorityVoteSolver/FullReadStrategy; sac = GreedySolver/ConvergenceProbeStrategy; "
            "esc = ESCSolver/FullReadStrategy") in notes
    assert max(len(line) for line in captured.out.splitlines()) <= 120
    assert "[pr1-eval] replayed 3 row(s) in" in captured.err  # progress off a terminal
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["vs_authors"] for r in rows] == ["equal", "Δacc -0.50 pp, Δtokens -35, Δsequential -35", None]
    assert rows[0]["authors_row"] == "MajorityVoteSolver/FullReadStrategy" and rows[2]["authors_row"] is None


def test_the_frontier_draws_the_authors_rings_over_ours_with_a_legend_entry(tmp_path: Path) -> None:
    from analysis.efficiency.frontier import frontier_figure
    from pr1_eval.replay.rows import ReplayRow

    base = dict(source="s", model="m", questions=3, seeds=2, match="exact", branches=4.0, acc_sd_over_seeds=0.0)
    rows = [ReplayRow(task="t", controller="sc@4", acc=50.0, tokens=100.0, seq_tokens=30.0, authors_acc=50.0,
                      authors_tokens=100.0, authors_seq_tokens=30.0, authors_row="MajorityVoteSolver/FullReadStrategy",
                      **base),
            ReplayRow(task="t", controller="sac", acc=40.0, tokens=20.0, seq_tokens=20.0, authors_acc=41.0,
                      authors_tokens=20.0, authors_seq_tokens=20.0, **base)]
    fig = frontier_figure(rows)
    names = [trace.name for trace in fig.data]
    legend = [trace.name for trace in fig.data if trace.showlegend]
    assert "authors' published point (ring)" in legend
    for controller in ("sc@4", "sac"):  # each panel: our dot first, their ring after it (drawn on top)
        assert names.index(controller) < names.index(f"{controller} (authors)")
    ring = next(trace for trace in fig.data if trace.name == "sac (authors)")
    assert ring.marker.size > next(trace for trace in fig.data if trace.name == "sac").marker.size
    assert "vs this replay: Δacc -1.00 pp" in ring.hovertext[0]
    assert "1 of 2 rows equal theirs" in fig.layout.title.text


@pytest.mark.parametrize(("spec", "message"), [
    ("vote@8", "unknown controller 'vote'"),
    ("esc@10", "multiple of the window 8"),
    ("asc@8:thresh=0.9", "'thresh=0.9' is not a parameter of asc"),
    ("sc@0", "outside 1..1,000,000"),
    ("probe@8:stable=x", "'x' is not a whole number"),
])
def test_bad_controller_specs_say_what_to_write(spec: str, message: str) -> None:
    with pytest.raises(Pr1EvalError, match=message.replace("(", r"\(")):
        parse_spec(spec)


@pytest.mark.parametrize(("data", "message"), [
    ([], "non-empty JSON list"),
    ([{"question": "q", "gold_answer": "1", "probe_freq": 500}], "missing field\\(s\\) each_branch"),
    ([{"question": "q", "gold_answer": "1", "probe_freq": 500, "each_branch": [[["1"], 1.5, "1"]]}],
     r"question 0.each_branch\[0\]\[1\]: expected a whole number"),
    ([{"question": "q", "gold_answer": 1, "probe_freq": 500, "each_branch": [[["1"], 5, "1"]]}],
     "gold_answer: expected a string"),
    ([{"question": "q", "gold_answer": "1", "probe_freq": 500, "each_branch": [[["1"], 5, "1"]],
       "final_answers_trace": ["2"]}], "disagrees with the final answers"),
    ([{"question": "q", "gold_answer": "1", "probe_freq": 500, "each_branch": [[["1"], 5, "1"]]},
      {"question": "r", "gold_answer": "1", "probe_freq": 500, "each_branch": [[["1"], 5, "1"]] * 2}],
     "different numbers of branches"),
])
def test_malformed_trajectory_files_are_named_with_their_place(tmp_path: Path, data: object, message: str) -> None:
    path = tmp_path / "m__t.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(Pr1EvalError, match=message):
        read_parallel_probe(path)


def test_a_run_without_probe_answers_cannot_be_replayed(tmp_path: Path) -> None:
    lines = [{"task": "t", "problem_id": "p", "sample_idx": i, "response": "Final Answer: 1", "gold": "1"}
             for i in range(2)]
    (tmp_path / "g.jsonl").write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    assert main(["import", str(tmp_path / "g.jsonl"), "--out", str(tmp_path / "run")]) == 0
    with pytest.raises(Pr1EvalError, match="no probe answers or token counts"):
        load_sources([str(tmp_path / "run")])


def test_the_dashboard_replays_loaded_runs_to_the_same_numbers(tmp_path: Path) -> None:
    """The Efficiency page's section reads runs through the one loader; its rows equal the file's."""
    from analysis.efficiency.frontier import frontier_figure, probed_runs, replay_loaded
    from analysis.runs.loader import load_runs

    source = write_trajectories(tmp_path / "m__toyset.json", questions=3, branches=8, seed=4)
    assert main(["import", str(source), "--format", "parallel-probe", "--out", str(tmp_path / "runs" / "r")]) == 0
    loaded = load_runs([tmp_path / "runs"], tokenizer=None, cache=False)
    assert probed_runs(loaded.samples) == ["r"]
    rows = replay_loaded(loaded.samples, ["sc@8", "probe@8:stable=2"], seeds=7)
    questions = read_parallel_probe(source).questions
    for row, spec in zip(rows, ["sc@8", "probe@8:stable=2"], strict=True):
        expected = replay(parse_spec(spec).controller, questions, range(7))
        assert (row.acc, row.tokens, row.seq_tokens) == (expected.acc_percent, expected.tokens,
                                                         expected.sequential_tokens)
    assert len(frontier_figure(rows).data) == 4  # two controllers × (total, sequential) panels
