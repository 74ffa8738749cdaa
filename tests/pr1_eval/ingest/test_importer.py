"""`pr1-eval import`: imported generations with known verdicts are graded and reported.

Each case's expected verdict is decided by reading the response, not by running the grader.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pr1_eval.grading.verify import HANG_ANSWER, TEST_HOOKS_ENV
from pr1_eval.store.run_store import RunStore
from tests.support.deadlines import scaled

FILLER = "Some reasoning that goes on. " * 20  # > 300 characters

# (problem_id, response, gold, correct, correct_paper, grade_status, answer_source)
CASES = [
    ("frac", "so it is\nFinal Answer: $\\dfrac{9}{7}$", "9/7", True, False, "ok", "final_answer"),
    ("paths-disagree", "<Parallel><Path>Final Answer: 5</Path><Path>x = 6</Path></Parallel><Summary>6</Summary>\n"
     "Final Answer: 6", "5", False, False, "ok", "final_answer"),
    ("truncated", "Let me compute 3 + 4 = ", "7", False, False, "no_answer", "none"),
    # the paper's checker does not skip paths, so it accepts what our extractor refuses
    ("unclosed-path", "<Parallel><Path>a</Path><Path>Final Answer: 7", "7", False, True, "no_answer", "none"),
    ("boxed", "The answer is $\\boxed{\\frac{1}{2}}$.", "0.5", True, False, "ok", "boxed"),
    ("early-answer", "Final Answer: 42\n" + FILLER, "42", True, False, "ok", "final_answer"),
    ("paper-ok", "work\nFinal Answer: 1,000", "1000", True, True, "ok", "final_answer"),
    ("huge", "x" * 3_000_000 + "\nFinal Answer: 12", "12", True, True, "ok", "final_answer"),
    # in $…$ so the whole test hook string is the answer (a bare word line is read as a sentence)
    ("hang", f"Final Answer: ${HANG_ANSWER}$", "3", None, False, "timeout", "final_answer"),
]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("imp")
    src = folder / "gen.jsonl"
    with src.open("w") as handle:
        for pid, response, gold, *_ in CASES:
            handle.write(json.dumps({"task": "mytask", "problem_id": pid, "sample_idx": 0, "response": response,
                                     "gold": gold, "model": "/x/global_step_40"}) + "\n")
    env = {**os.environ, TEST_HOOKS_ENV: "1", "PR1_EVAL_GRADING_WORKERS": "2"}
    done = subprocess.run([sys.executable, "-m", "pr1_eval.cli.main", "import", str(src), "--out", str(folder / "run")],
                          env=env, capture_output=True, text=True, timeout=scaled(300))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "mytask" in done.stdout
    return folder / "run"


def test_each_case_gets_its_known_verdict(imported: Path) -> None:
    frame = RunStore(imported).read_frame().set_index("problem_id")
    for pid, _, _, correct, correct_paper, status, source in CASES:
        row = frame.loc[pid]
        assert row["grade_status"] == status, pid
        assert (None if row["correct"] is None else bool(row["correct"])) == correct, pid
        assert bool(row["correct_paper"]) == correct_paper, pid
        assert row["answer_source"] == source, pid
    assert frame.loc["paths-disagree", "extracted_answer"] == "6"
    assert not frame.loc["unclosed-path", "format_ok"]
    assert frame.loc["paths-disagree", "has_parallel"] and frame.loc["paths-disagree", "paths_per_block"].tolist() == [2]


def test_imported_run_reports_like_a_generated_one(imported: Path) -> None:
    info = json.loads((imported / "run.json").read_text())
    assert info["model"]["step"] == 40 and info["k"] == 1
    done = subprocess.run([sys.executable, "-m", "pr1_eval.cli.main", "report", str(imported), "--json"],
                          capture_output=True, text=True, timeout=scaled(120))
    m = json.loads(done.stdout)["tasks"]["mytask"]
    n_correct = sum(1 for case in CASES if case[3])
    assert m["n_problems"] == len(CASES) and m["mean@1"] == pytest.approx(n_correct / len(CASES))
    assert m["n_unscored"] == 1


def test_malformed_import_line_names_file_and_line(tmp_path: Path) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text(json.dumps({"task": "t", "problem_id": "p", "sample_idx": 0, "response": "r", "gold": "1"}) + "\n"
                   + json.dumps({"task": "t", "problem_id": "p", "response": "r"}) + "\n")
    done = subprocess.run([sys.executable, "-m", "pr1_eval.cli.main", "import", str(src), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 2 and "bad.jsonl:2: missing field(s) sample_idx;" in done.stderr


def test_regrade_restores_verdicts_without_generating(imported: Path, tmp_path: Path) -> None:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(imported, run)
    store = RunStore(run)
    records = store.read_records()
    stale = next(r for r in records if r.problem_id == "frac")
    stale.correct, stale.grade_status = False, "ok"  # what an older, weaker grader might have said
    store.rewrite(records)
    env = {**os.environ, TEST_HOOKS_ENV: "1"}
    done = subprocess.run([sys.executable, "-m", "pr1_eval.cli.main", "regrade", str(run)], env=env,
                          capture_output=True, text=True, timeout=scaled(300))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "1 verdict(s) changed" in done.stdout
    frame = RunStore(run).read_frame().set_index("problem_id")
    assert bool(frame.loc["frac", "correct"]) is True
    assert len(frame) == len(CASES)


def _write(path: Path, counts: dict[tuple[str, str], int], gold: str = "1") -> Path:
    with path.open("w") as handle:
        for (task, pid), n in counts.items():
            for i in range(n):  # sample i answers i: only sample 1 is right
                handle.write(json.dumps({"task": task, "problem_id": pid, "sample_idx": i,
                                         "response": f"Final Answer: {i}", "gold": gold}) + "\n")
    return path


def test_uneven_import_names_problems_counts_and_the_import_fix(tmp_path: Path) -> None:
    src = _write(tmp_path / "uneven.jsonl", {("aime24", "a0"): 4, ("aime24", "a1"): 4, ("aime24", "a2"): 3,
                                             ("aime24", "a3"): 2, ("math300_pr1", "m0"): 1})
    done = subprocess.run([sys.executable, "-m", "pr1_eval.cli.main", "import", str(src), "--out", str(tmp_path / "run"),
                           "--grade-workers", "1"], capture_output=True, text=True, timeout=scaled(300))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "aime24: 2 problem(s) have fewer than 4 samples (a2: 3, a3: 2)" in done.stdout
    assert "complete the import file" in done.stdout and "--k aime24=2" in done.stdout
    assert "rerun the same command" not in done.stdout
    strict = subprocess.run([sys.executable, "-m", "pr1_eval.cli.main", "report", str(tmp_path / "run"), "--strict", "--json"],
                            capture_output=True, text=True, timeout=scaled(120))
    assert strict.returncode == 2 and "incomplete (--strict)" in strict.stderr
    report = json.loads(strict.stdout)
    aime = report["tasks"]["aime24"]
    assert not report["complete"] and not aime["complete"] and aime["short_problems"] == {"a2": 3, "a3": 2}
    assert aime["partial"]["mean@4"] == pytest.approx(0.25)  # a0, a1: one right answer of 4 each
    assert report["tasks"]["math300_pr1"]["complete"]


def test_import_records_per_task_k_and_k_option_keeps_the_lowest_samples(tmp_path: Path) -> None:
    from pr1_eval.ingest.importer import import_jsonl, parse_k_option
    from pr1_eval.report.run_report import run_report

    src = _write(tmp_path / "mixed.jsonl", {("aime24", "a0"): 16, ("aime24", "a1"): 16, ("math300_pr1", "m0"): 1,
                                            ("math300_pr1", "m1"): 1})
    run = import_jsonl(src, tmp_path / "run", workers=1)
    info = json.loads((run / "run.json").read_text())
    assert info["k"] is None and info["tasks"]["aime24"]["k"] == 16 and info["tasks"]["math300_pr1"]["k"] == 1
    assert info["tasks"]["aime24"]["problem_ids"] == ["a0", "a1"] and info["status"] == "complete"
    report = run_report(RunStore(run).read_frame(), run=RunStore(run).read_run()).to_json()
    assert report["complete"] and report["tasks"]["aime24"]["mean@16"] == pytest.approx(1 / 16)
    assert report["tasks"]["math300_pr1"]["mean@1"] == 0.0  # sample 0 answers 0

    cut = import_jsonl(src, tmp_path / "cut", workers=1, k=parse_k_option("aime24=2"))
    info = json.loads((cut / "run.json").read_text())
    frame = RunStore(cut).read_frame()
    assert sorted(frame.loc[frame["task"] == "aime24", "sample_idx"].unique()) == [0, 1]
    assert info["tasks"]["aime24"]["k"] == 2 and info["samples_left_out_by_k"] == 28
    assert run_report(frame, run=RunStore(cut).read_run()).to_json()["tasks"]["aime24"]["mean@2"] == pytest.approx(0.5)
    with pytest.raises(Exception, match="does not hold"):
        import_jsonl(src, tmp_path / "bad", workers=1, k={"aime25": 2})
    with pytest.raises(Exception, match="expected a number"):
        parse_k_option("four")
