"""Reading lm-eval's ``--log_samples`` output into pr1-eval import rows.

The files here are written in the exact layout lm-eval 0.4.13 produces (checked against a real
run in ``tests/pr1_eval/lm_eval_tasks/test_cli.py``): ``<out>/<model>/samples_<task>_<date>.jsonl`` with ``resps``
nested per request then per repeat, and ``results_<date>.json`` beside it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from pr1_eval.errors import Pr1EvalError
from pr1_eval.ingest.lm_eval_import import find_sample_files, import_lm_eval, lm_eval_run_info, read_lm_eval_samples

DATE = "2026-11-29T10-17-07.547336"
GEN = {"until": [], "do_sample": True, "temperature": 1.0, "top_p": 1.0, "max_gen_toks": 3000}


def _sample(doc_id: int, doc: dict[str, Any], responses: list[str], target: str) -> dict[str, Any]:
    return {
        "doc_id": doc_id, "doc": doc, "target": target,
        "arguments": {"gen_args_0": {"arg_0": "<|im_start|>user\n...", "arg_1": GEN}},
        "resps": [responses], "filtered_resps": [responses], "filter": "k16", "metrics": ["mean@16"],
        "doc_hash": "x", "prompt_hash": "y", "target_hash": "z",
    }


def _write_run(folder: Path, lm_task: str, samples: list[dict[str, Any]], *, model_args: Any = None,
               chat_template: str | None = "{{ messages }}", output_type: str = "generate_until", date: str = DATE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"samples_{lm_task}_{date}.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples), encoding="utf-8")
    results = {
        "results": {lm_task: {}}, "configs": {lm_task: {"task": lm_task, "output_type": output_type, "repeats": 4,
                                                        "generation_kwargs": GEN}},
        "versions": {lm_task: 1.0}, "config": {"model": "hf", "model_args": model_args or {"pretrained": "/ckpt/global_step_40"}},
        "lm_eval_version": "0.4.13", "chat_template": chat_template, "system_instruction": None, "model_name": "/ckpt/global_step_40",
    }
    (folder / f"results_{date}.json").write_text(json.dumps(results), encoding="utf-8")
    return path


def _pr1_samples() -> list[dict[str, Any]]:
    docs = [{"task": "aime24", "problem_id": "aime24-0", "problem": "P0", "gold": "204"},
            {"task": "aime24", "problem_id": "aime24-1", "problem": "P1", "gold": "25"}]
    return [_sample(i, d, [f"<Parallel>x</Parallel> Final Answer: {d['gold'] if j % 2 else 1}" for j in range(4)], d["gold"])
            for i, d in enumerate(docs)]


def test_every_repeat_becomes_a_sample_of_the_pr1_task(tmp_path: Path) -> None:
    path = _write_run(tmp_path / "out" / "ckpt", "pr1_aime24", _pr1_samples())
    rows = read_lm_eval_samples(path)
    assert len(rows) == 8
    assert [(r["problem_id"], r["sample_idx"]) for r in rows] == [(f"aime24-{i}", j) for i in range(2) for j in range(4)]
    assert {r["task"] for r in rows} == {"aime24"}  # pr1-eval's name, so runs line up with native ones
    assert rows[5]["response"] == "<Parallel>x</Parallel> Final Answer: 25" and rows[5]["gold"] == "25"
    assert rows[0]["problem"] == "P0" and rows[0]["model"] == "/ckpt/global_step_40"
    assert rows[3]["_where"].endswith(f"samples_pr1_aime24_{DATE}.jsonl:1")
    assert read_lm_eval_samples(tmp_path / "out") == rows  # the output folder works as well


def test_other_generation_tasks_use_lm_eval_names_and_targets(tmp_path: Path) -> None:
    samples = [_sample(0, {"question": "1+1?", "id": "q-a", "task": "arithmetic"}, ["Final Answer: 2"], "2"),
               _sample(1, {"question": "2+2?"}, ["Final Answer: 5"], "4")]
    path = _write_run(tmp_path, "gsm8k_cot", samples, model_args="pretrained=org/model,dtype=bfloat16")
    rows = read_lm_eval_samples(path)
    assert [(r["task"], r["problem_id"], r["gold"], r["problem"]) for r in rows] == [
        ("gsm8k_cot", "q-a", "2", "1+1?"), ("gsm8k_cot", "1", "4", "2+2?")]
    assert rows[0]["model"] == "org/model"


def test_samples_without_their_results_file_still_import(tmp_path: Path) -> None:
    path = _write_run(tmp_path, "pr1_aime24", _pr1_samples())
    (tmp_path / f"results_{DATE}.json").unlink()
    rows = read_lm_eval_samples(path)
    assert len(rows) == 8 and "model" not in rows[0]


def test_two_runs_of_one_task_in_a_folder_are_refused(tmp_path: Path) -> None:
    _write_run(tmp_path, "pr1_aime24", _pr1_samples())
    _write_run(tmp_path, "pr1_aime24", _pr1_samples(), date="2026-11-30T08-00-00.000001")
    with pytest.raises(Pr1EvalError, match="2 lm-eval sample files for task 'pr1_aime24'"):
        find_sample_files(tmp_path)


def test_errors_name_file_and_line(tmp_path: Path) -> None:
    path = _write_run(tmp_path, "pr1_aime24", _pr1_samples())
    with path.open("a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    with pytest.raises(Pr1EvalError, match=r"samples_pr1_aime24_.*\.jsonl:3: not valid JSON"):
        read_lm_eval_samples(path)
    path.write_text(json.dumps({"doc_id": 0}) + "\n")
    with pytest.raises(Pr1EvalError, match=r":1: not an lm-eval sample"):
        read_lm_eval_samples(path)
    with pytest.raises(Pr1EvalError, match="not found"):
        read_lm_eval_samples(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(Pr1EvalError, match="no samples_"):
        read_lm_eval_samples(empty)


def test_loglikelihood_tasks_are_refused(tmp_path: Path) -> None:
    path = _write_run(tmp_path, "arc_easy", [_sample(0, {"question": "?"}, ["(-1.2, False)"], "A")],
                      output_type="multiple_choice")
    with pytest.raises(Pr1EvalError, match="multiple_choice task"):
        read_lm_eval_samples(path)


def test_import_makes_a_graded_run_that_records_the_lm_eval_settings(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from pr1_eval.report.run_report import run_report
    from pr1_eval.store.run_store import RunStore

    path = _write_run(tmp_path / "lm", "pr1_aime24", _pr1_samples(), chat_template=None)
    with caplog.at_level(logging.WARNING, logger="pr1_eval.ingest.lm_eval_import"):
        run = import_lm_eval(path, tmp_path / "run")
    assert "without --apply_chat_template" in caplog.text
    info = json.loads((run / "run.json").read_text())
    assert info["sampling"] == GEN and info["k"] == 4 and info["model"]["step"] == 40
    assert info["lm_eval"][0]["lm_eval_task"] == "pr1_aime24" and info["lm_eval"][0]["chat_template_applied"] is False
    assert lm_eval_run_info(path)["engine"] == {"backend": "lm-eval", "model": "hf"}
    frame = RunStore(run).read_frame()
    assert len(frame) == 8 and frame["grade_status"].isin(["ok", "no_answer"]).all()
    metrics = run_report(frame, 4).to_json()["tasks"]["aime24"]
    assert metrics["mean@4"] == 0.5 and metrics["parallel_ratio"] == 1.0


def test_import_declares_problems_and_k_from_lm_eval_repeats(tmp_path: Path) -> None:
    """k is the run's `repeats` (4 here), so a document that came back with fewer responses is named."""
    from pr1_eval.report.run_report import run_report
    from pr1_eval.store.run_store import RunStore

    samples = _pr1_samples()
    samples[1]["resps"] = [samples[1]["resps"][0][:3]]  # 3 of the 4 repeats
    path = _write_run(tmp_path / "lm", "pr1_aime24", samples)
    run = import_lm_eval(path, tmp_path / "run", workers=1)
    info = json.loads((run / "run.json").read_text())
    assert info["tasks"]["aime24"]["k"] == 4 and info["tasks"]["aime24"]["problem_ids"] == ["aime24-0", "aime24-1"]
    report = run_report(RunStore(run).read_frame(), run=RunStore(run).read_run()).to_json()
    assert not report["complete"] and report["tasks"]["aime24"]["short_problems"] == {"aime24-1": 3}
    assert "--k aime24=3" in report["advice"]


def _prose_samples(policy: str | None) -> list[dict[str, Any]]:
    """Two problems, four responses each: two prose answers ("the answer is $N$.", read only by the
    lenient policy), one right Final Answer line, one wrong one. Documents record ``policy`` as the
    pr1_* tasks do (``answer_policy``; None: an older task that recorded none)."""
    docs = [{"task": "aime24", "problem_id": f"aime24-{i}", "problem": "P", "gold": gold}
            for i, gold in enumerate(("204", "25"))]
    for doc in docs:
        if policy is not None:
            doc["answer_policy"] = policy
    return [_sample(i, d, [f"So the answer is ${d['gold']}$.", f"Thus the answer is ${d['gold']}$.",
                           f"Final Answer: {d['gold']}", "Final Answer: 1"], d["gold"]) for i, d in enumerate(docs)]


@pytest.mark.parametrize(("recorded", "asked", "policy", "mean"), [
    ("lenient", None, "lenient", 0.75), ("paper", None, "paper", 0.25), (None, None, "paper", 0.25),
    ("lenient", "paper", "paper", 0.25)])
def test_import_grades_under_the_policy_the_lm_eval_task_recorded(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                                  recorded: str | None, asked: str | None, policy: str,
                                                                  mean: float) -> None:
    """By hand: lenient reads 3 of 4 answers right per problem (both prose ones and the Final Answer
    line), paper only the Final Answer line (1 of 4). An explicit --answer-policy wins, with a warning."""
    from pr1_eval.report.run_report import run_report
    from pr1_eval.store.run_store import RunStore

    path = _write_run(tmp_path / "lm", "pr1_aime24", _prose_samples(recorded))
    with caplog.at_level(logging.WARNING, logger="pr1_eval.ingest.lm_eval_import"):
        run = import_lm_eval(path, tmp_path / "run", workers=0, answer_policy=asked)
    assert ("report's numbers will differ" in caplog.text) == (asked is not None and asked != recorded)
    store = RunStore(run)
    assert store.read_run().policy == policy
    assert run_report(store.read_frame(), 4).to_json()["tasks"]["aime24"]["mean@4"] == pytest.approx(mean)


def test_documents_graded_under_different_policies_are_refused(tmp_path: Path) -> None:
    samples = _prose_samples("lenient")
    samples[1]["doc"]["answer_policy"] = "paper"
    path = _write_run(tmp_path / "lm", "pr1_aime24", samples)
    with pytest.raises(Pr1EvalError, match="different answer policies \\(lenient, paper\\).*--answer-policy"):
        import_lm_eval(path, tmp_path / "run", workers=0)
