"""Answer policies: what each reads (by hand), that grading, run.json, ``regrade``, the report
and the leaderboard all carry the chosen one, and that runs under different ones are not compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pr1_eval.errors import Pr1EvalError
from pr1_eval.grading import grade_responses
from pr1_eval.grading.policy import default_policy, extract_by_policy, latex_of_plain
from pr1_eval.records.answer_policy import ANSWER_POLICIES, check_policy

BLOCK = "<Parallel>\n<Path>\nThe answer is 9.\n</Path>\n<Path>\n\\boxed{9}\n</Path>\n</Parallel>\n<Summary>\ns\n</Summary>\n"


@pytest.mark.parametrize(
    ("response", "paper", "lenient"),
    [
        ("The answer is $110$.", None, "110"),  # prose: only lenient reads it
        ("So we get 110 apples. I hope it is right.", None, "110"),  # trailing prose without a value is passed over
        ("We add 3 and 4. The total is 7.", None, "7"),  # the final sentence, not the first
        ("Thus the answer is 3 sqrt(5).", None, "3 \\sqrt{5}"),
        ("The result is 137 1/2.", None, "137\\frac{1}{2}"),
        ("Working.\nFinal Answer: 5", "5", "5"),  # the paper's format reads the same under both
        ("x\n\\boxed{7}\nFinal Answer: 8", "8", "7"),  # paper: the Final Answer line wins; lenient: the box
        ("So it is \\boxed{12}.", "12", "12"),
        (BLOCK + "Done.", None, None),  # never from inside a path
        (BLOCK + "The answer is 4.", None, "4"),
        ("Final Answer: It is not 5.", None, None),  # a line that only rejects a value states none
        ("I cannot solve this.", None, None),
        ("The answer is 6.<|im_end|>The answer is 9.", None, "6"),  # nothing after the end of the turn
    ],
)
def test_each_policy_reads_what_it_says(response: str, paper: str | None, lenient: str | None) -> None:
    assert extract_by_policy(response, "paper").text == paper
    assert extract_by_policy(response, "lenient").text == lenient


def test_paper_policy_is_todays_reading() -> None:
    from pr1_eval.grading import extract_answer

    for response in ("Final Answer: $\\frac{3}{4}$", "x \\boxed{2} y", "The answer is 5.", BLOCK + "Final Answer: 1"):
        assert extract_by_policy(response, "paper") == extract_answer(response)


@pytest.mark.parametrize(("plain", "latex"), [("3 sqrt(5)", "3 \\sqrt{5}"), ("sqrt 2", "\\sqrt{2}"), ("2√3", "2\\sqrt{3}"),
                                              ("137 1/2", "137\\frac{1}{2}"), ("-2 3/4", "-2\\frac{3}{4}"),
                                              ("\\sqrt{5}", "\\sqrt{5}"), ("1/2", "1/2"), ("x + 1", "x + 1")])
def test_plain_text_math_is_written_as_latex(plain: str, latex: str) -> None:
    assert latex_of_plain(plain) == latex


def test_defaults_per_template_and_unknown_names() -> None:
    assert default_policy("parallel_r1_v3") == "paper"
    assert default_policy("sequential_baseline") == default_policy("boxed") == default_policy("my_prompt") == "lenient"
    assert ANSWER_POLICIES[0] == default_policy(None) == "paper"
    with pytest.raises(Pr1EvalError, match="unknown answer policy 'loose'; use one of paper, lenient"):
        check_policy("loose")
    with pytest.raises(Pr1EvalError, match="unknown answer policy"):
        grade_responses([("Final Answer: 1", "1")], workers=0, policy="loose")


def test_grading_under_lenient_matches_prose_and_plain_forms() -> None:
    pairs = [("The answer is $110$.", "110"), ("Thus the answer is 3 sqrt(5).", "3\\sqrt{5}"),
             ("The result is 137 1/2.", "137\\frac{1}{2}"), ("The answer is $111$.", "110")]
    paper = grade_responses(pairs, workers=0, policy="paper")
    lenient = grade_responses(pairs, workers=0, policy="lenient")
    assert [r.grade_status for r in paper] == ["no_answer"] * 4
    assert [(r.correct, r.answer_source) for r in lenient] == [(True, "sentence")] * 3 + [(False, "sentence")]
    assert [r.correct_paper for r in paper] == [r.correct_paper for r in lenient]  # the paper checker has no policy


def _import(rows: list[dict[str, object]], out: Path, policy: str = "paper") -> Path:
    from pr1_eval.ingest.importer import import_rows

    return import_rows(rows, out, source="test", workers=1, answer_policy=policy)


ROWS = [{"task": "t", "problem_id": f"p{i}", "sample_idx": 0, "response": f"So the answer is ${i + 1}$.",
         "gold": str(i + 1)} for i in range(3)]


def test_regrade_switches_the_policy_and_every_surface_says_so(tmp_path: Path) -> None:
    from pr1_eval.grading.regrade import regrade
    from pr1_eval.report.load import load_report
    from pr1_eval.report.table import format_report_table
    from pr1_eval.store.run_store import RunStore

    run = _import(ROWS, tmp_path / "run")
    assert json.loads((run / "run.json").read_text())["answer_policy"] == "paper"
    before = load_report(run)
    assert before.answer_policy == "paper" and before.tasks["t"].metrics is not None
    assert before.tasks["t"].metrics.mean == 0.0 and before.tasks["t"].metrics.no_answer_ratio == 1.0
    assert format_report_table(before).splitlines()[0].startswith("answer policy: paper (the last Final Answer: line")

    summary = regrade(run, workers=1, answer_policy="lenient")
    assert summary["changed"] == 3 and summary["policy"] == "lenient"
    record = RunStore(run).read_run()
    assert record.answer_policy == "lenient" and record.regraded_at is not None
    after = load_report(run)
    assert after.tasks["t"].metrics is not None and after.tasks["t"].metrics.mean == 1.0
    assert after.to_json()["answer_policy"] == "lenient"
    assert format_report_table(after).splitlines()[0].startswith("answer policy: lenient (the last \\boxed{}")
    assert regrade(run, workers=1)["policy"] == "lenient"  # without the option, the run keeps its own


def test_a_run_json_without_a_policy_reads_as_paper_and_a_bad_one_is_named(tmp_path: Path) -> None:
    from pr1_eval.records.run import RunRecord

    assert RunRecord.from_dict({"k": 1}).policy == "paper"
    assert "answer_policy" not in RunRecord.from_dict({"k": 1}).to_dict()
    with pytest.raises(Pr1EvalError, match="field 'answer_policy' is 'loose', not an answer policy"):
        RunRecord.from_dict({"answer_policy": "loose"}, where="x/run.json")


def test_leaderboard_refuses_runs_graded_under_different_policies(tmp_path: Path) -> None:
    from analysis.leaderboard.board import NotComparable, build_leaderboard, compute_leaderboard
    from analysis.leaderboard.page import leaderboard_html
    from analysis.leaderboard.tables import render

    paper = _import(ROWS, tmp_path / "a")
    lenient = _import(ROWS, tmp_path / "b", policy="lenient")
    with pytest.raises(NotComparable, match="answer policy differs: b was graded under lenient, a under paper") as err:
        build_leaderboard([paper, lenient], intersect=True)
    assert f"pr1-eval regrade {lenient.resolve()} --answer-policy paper" in str(err.value.differences)
    board = compute_leaderboard([lenient, _import(ROWS, tmp_path / "c", policy="lenient")])
    doc = board.document
    assert doc["answer_policy"] == "lenient" and {r["answer_policy"] for r in doc["runs"]} == {"lenient"}
    assert render(doc, "text").startswith("== Leaderboard (answer policy: lenient) ==")
    assert "Answer policy of every run: lenient." in leaderboard_html(board)


def test_import_and_regrade_commands_take_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pr1_eval.cli.main import main

    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert main(["import", str(source), "--out", str(tmp_path / "run"), "--answer-policy", "lenient",
                 "--grade-workers", "1"]) == 0
    assert json.loads((tmp_path / "run" / "run.json").read_text())["answer_policy"] == "lenient"
    assert "answer policy: lenient" in capsys.readouterr().out
    assert main(["regrade", str(tmp_path / "run"), "--answer-policy", "paper", "--grade-workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "under answer policy paper; 3 verdict(s) changed" in out and "answer policy: paper" in out
    assert json.loads((tmp_path / "run" / "run.json").read_text())["answer_policy"] == "paper"


@pytest.mark.parametrize(("prompt", "given", "recorded"), [("parallel_r1_v3", None, "paper"), ("boxed", None, "lenient"),
                                                         ("sequential_baseline", None, "lenient"),
                                                         ("boxed", "paper", "paper")])
def test_a_run_records_its_templates_default_or_the_given_policy(tmp_path: Path, prompt: str, given: str | None,
                                                                 recorded: str) -> None:
    from pr1_eval.generate.config import RunConfig
    from pr1_eval.generate.plan import build_plan
    from pr1_eval.testing.tiny_model import cached_tiny_model

    config = RunConfig(model=str(cached_tiny_model("random")), tasks=["aime24"], k=1, limit=1, engine="hf",
                       prompt=prompt, answer_policy=given, out=str(tmp_path / "run"))
    plan = build_plan(config)
    assert plan.record.answer_policy == plan.config.answer_policy == recorded
