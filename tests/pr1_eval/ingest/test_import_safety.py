"""No import destroys a run, and an import under a packaged benchmark's name says what it holds.

Expected values come from the fixture files themselves (which problems of the packaged aime24 a
file holds, which golds were changed), never from the checking code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from pr1_eval.ingest.importer import import_jsonl
from pr1_eval.report.completeness import check_run
from pr1_eval.store.run_store import RunStore

KEY = ["task", "problem_id", "sample_idx"]


def _rows(task: str, n_problems: int, k: int, tag: str) -> list[dict[str, object]]:
    return [{"task": task, "problem_id": f"{tag}{p}", "sample_idx": s, "response": f"Final Answer: {s}", "gold": "1"}
            for p in range(n_problems) for s in range(k)]


def _file(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _samples(run: Path) -> pd.DataFrame:
    return RunStore(run).read_frame().sort_values(KEY).reset_index(drop=True)


@pytest.fixture()
def forty(tmp_path: Path) -> Path:
    """A 40-sample run (10 problems × 4) that a second import must not destroy."""
    return import_jsonl(_file(tmp_path / "first.jsonl", _rows("mytask", 10, 4, "p")), tmp_path / "run", workers=1)


def test_an_import_onto_a_run_is_refused_and_the_run_is_untouched(forty: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    before, run_json = _samples(forty), (forty / "run.json").read_bytes()
    second = _file(tmp_path / "second.jsonl", _rows("mytask", 7, 1, "q"))
    assert main(["import", str(second), "--out", str(forty), "--grade-workers", "1"]) == 2
    err = capsys.readouterr().err
    assert f"--out {forty} already holds a run (status complete, 40 samples, tasks mytask)" in err
    assert f"--out {forty}-2" in err and "--replace" in err and len(err.strip().splitlines()) == 1
    pd.testing.assert_frame_equal(_samples(forty), before)
    assert (forty / "run.json").read_bytes() == run_json


def test_replace_moves_the_old_run_aside_intact(forty: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, run_json = _samples(forty), (forty / "run.json").read_bytes()
    second = _file(tmp_path / "second.jsonl", _rows("mytask", 7, 1, "q"))
    assert main(["import", str(second), "--out", str(forty), "--replace", "--grade-workers", "1"]) == 0
    asides = sorted((tmp_path / ".replaced").glob("run.replaced-*"))  # hidden: no search finds it
    assert len(asides) == 1
    printed = capsys.readouterr()
    assert f"aside to {asides[0]}" in printed.err
    assert "note: replaces a run (replaced on " in printed.out and f"kept at {asides[0]}" in printed.out
    pd.testing.assert_frame_equal(_samples(asides[0]), before)
    kept = json.loads((asides[0] / "run.json").read_text(encoding="utf-8"))
    assert kept.pop("replaced")["by"] == str(forty) and kept == json.loads(run_json)  # only the stamp added
    assert len(_samples(forty)) == 7 and set(_samples(forty)["problem_id"]) == {f"q{p}" for p in range(7)}


def test_the_lm_eval_import_and_samples_without_run_json_are_refused_too(forty: Path, tmp_path: Path) -> None:
    from pr1_eval.ingest.lm_eval_import import import_lm_eval

    with pytest.raises(Pr1EvalError, match="already holds a run"):
        import_lm_eval(tmp_path / "no-such-lm-eval-output", forty)  # refused before the input is even read
    (forty / "run.json").unlink()  # the samples of a run whose record was lost are still a run's
    with pytest.raises(Pr1EvalError, match="already holds a run"):
        import_jsonl(_file(tmp_path / "x.jsonl", _rows("mytask", 1, 1, "z")), forty, workers=1)


def _packaged(name: str) -> list[dict[str, str]]:
    from pr1_eval.inputs.paths import packaged_benchmarks_dir

    path = packaged_benchmarks_dir() / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _benchmark_rows(task: str, problems: list[dict[str, str]]) -> list[dict[str, object]]:
    return [{"task": task, "problem_id": p["id"], "sample_idx": 0, "response": f"Final Answer: {p['answer']}",
             "gold": p["answer"], "problem": p["problem"]} for p in problems]


def test_a_subset_of_a_packaged_benchmark_reports_as_partial(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    aime = _packaged("aime24")
    assert len(aime) == 30
    src = _file(tmp_path / "part.jsonl", _benchmark_rows("aime24", aime[:25]))
    assert main(["import", str(src), "--out", str(tmp_path / "part"), "--grade-workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "25 of 30 problems of the packaged aime24" in out and "INCOMPLETE" in out
    assert main(["report", str(tmp_path / "part"), "--strict"]) == 2
    assert "25 of 30 problems of the packaged aime24" in capsys.readouterr().err
    check = check_run(tmp_path / "part")
    assert not check.complete and check.tasks["aime24"].part_of is not None
    assert (check.tasks["aime24"].part_of.held, check.tasks["aime24"].part_of.total) == (25, 30)
    missing = [p["id"] for p in aime[25:]]
    assert missing[0] in check.tasks["aime24"].describe()

    whole = import_jsonl(_file(tmp_path / "whole.jsonl", _benchmark_rows("aime24", aime)), tmp_path / "whole", workers=1)
    assert check_run(whole).complete and not check_run(whole).warnings()
    report = json.loads((whole / "run.json").read_text())["benchmark_check"]["aime24"]
    assert report["verdict"] == "whole" and report["n_matched"] == 30


def test_index_ids_with_the_benchmarks_golds_are_its_problems(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Ids 0..24 with aime24's first 25 golds and no problem text: 25 of 30 problems of aime24,
    marked incomplete (it was called "a different problem set; rename the task")."""
    aime = _packaged("aime24")
    rows = [{"task": "aime24", "problem_id": str(i), "sample_idx": 0, "response": f"Final Answer: {p['answer']}",
             "gold": p["answer"]} for i, p in enumerate(aime[:25])]
    assert main(["import", str(_file(tmp_path / "idx.jsonl", rows)), "--out", str(tmp_path / "idx"),
                 "--grade-workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "25 of 30 problems of the packaged aime24" in out and "INCOMPLETE" in out and "none of its" not in out
    check = check_run(tmp_path / "idx")
    assert not check.complete and (check.tasks["aime24"].part_of.held, check.tasks["aime24"].part_of.total) == (25, 30)


def test_a_different_set_with_index_ids_is_told_what_to_do(tmp_path: Path) -> None:
    """Index ids whose golds are not the benchmark's (one coincidence allowed for): not taken for
    aime24, and the warning says how to fix either case, naming the "problem" field."""
    aime = _packaged("aime24")
    rows = [{"task": "aime24", "problem_id": str(i), "sample_idx": 0, "response": "Final Answer: 1",
             "gold": aime[i]["answer"] if i == 0 else str(1000 + i)} for i in range(10)]
    check = check_run(import_jsonl(_file(tmp_path / "other.jsonl", rows), tmp_path / "other", workers=1))
    warning = " | ".join(check.warnings())
    assert "none of its 10 problems is in the packaged aime24" in warning
    assert 'add each line\'s problem text as a "problem" field' in warning and "rename the task" in warning
    assert check.tasks["aime24"].part_of is None


def test_the_help_and_the_docs_show_a_full_line_that_imports(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The format is in `import --help` and the import page of the docs, as a full line with the
    problem field; the line as printed is a valid import line."""
    from pr1_eval.ingest.importer import REQUIRED

    with pytest.raises(SystemExit):
        main(["import", "--help"])
    text = capsys.readouterr().out
    start = text.index('{"task"')
    row = json.loads(text[start:text.index("}", start) + 1])  # wrapped at 80 columns between the fields
    assert set(REQUIRED) | {"problem"} <= set(row)
    page = (Path(__file__).resolve().parents[3] / "docs" / "usage" / "import.md").read_text(encoding="utf-8")
    in_docs = next(json.loads(line) for line in page.splitlines() if line.startswith('{"task"'))
    assert set(in_docs) == set(row)
    assert main(["import", str(_file(tmp_path / "one.jsonl", [row])), "--out", str(tmp_path / "one"),
                 "--grade-workers", "1"]) == 0
    assert RunStore(tmp_path / "one").read_frame()["correct"].tolist() == [True]


def test_training_rollouts_are_not_compared_with_a_benchmark() -> None:
    """A GSM8K-train job's rollouts, matched under the name gsm8k: no "different problem set"
    warning on every step (validation steps are still checked)."""
    from pr1_eval.ingest.verl_import import StepFile, _benchmark_check
    from tests.support.analysis_fixtures import make_record

    records = [make_record("gsm8k", "train-7", 0, "Final Answer: 3")]
    assert _benchmark_check(StepFile(Path("job/rollout/1.jsonl"), "train", 1), records) == {}
    assert _benchmark_check(StepFile(Path("job/val/1.jsonl"), "validation", 1), records)["gsm8k"]["verdict"] == "different"


def test_ids_and_golds_that_differ_are_named(tmp_path: Path) -> None:
    aime = _packaged("aime24")
    rows = _benchmark_rows("aime24", aime)
    rows[3]["gold"] = "999" if aime[3]["answer"] != "999" else "998"
    renamed = dict(rows[4], problem_id="my-own-id")  # same problem text, another id: matched by text
    foreign = dict(rows[5], problem_id="extra-1", problem="A problem that is not in AIME 2024.")
    rows = rows[:4] + [renamed, foreign] + rows[6:]  # aime24-5 is replaced by a foreign problem
    run = import_jsonl(_file(tmp_path / "f.jsonl", rows), tmp_path / "run", workers=1)
    check = check_run(run)
    warnings = " | ".join(check.warnings())
    assert f"{aime[3]['id']}: '{rows[3]['gold']}' here, '{aime[3]['answer']}' packaged" in warnings
    assert "1 problem id(s) are not in the packaged aime24 (extra-1)" in warnings
    assert "29 of 30 problems of the packaged aime24" in check.tasks["aime24"].describe()
    assert aime[5]["id"] in check.tasks["aime24"].describe() and not check.complete


def test_an_unknown_task_name_warns_with_the_closest_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _file(tmp_path / "typo.jsonl", _rows("aime2024", 2, 1, "x"))
    assert main(["import", str(src), "--out", str(tmp_path / "typo"), "--grade-workers", "1"]) == 0
    captured = capsys.readouterr()
    assert "aime2024: not a packaged benchmark" in captured.err and "did you mean aime24" in captured.err
    assert "did you mean aime24" in captured.out  # and the report says it again, under the table
    assert check_run(tmp_path / "typo").complete  # a warning, not an incompleteness


def test_a_line_cut_short_gets_the_whole_json_reason_with_line_and_column(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    whole = json.dumps(_rows("mytask", 1, 1, "p")[0])
    src = tmp_path / "cut.jsonl"
    src.write_text(whole + "\n" + whole[:40] + "\n", encoding="utf-8")  # line 2 stops inside a string
    assert main(["import", str(src), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    column = 41  # json reports the newline that ends the cut line, one past the 40 characters kept
    assert err == (f"error: {src}:2: not valid JSON (Invalid control character at column {column}; the line ends at "
                   "column 40 before the JSON value closes, so it looks cut short)")
    assert not (tmp_path / "run").exists()
