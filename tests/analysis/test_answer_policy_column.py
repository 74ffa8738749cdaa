"""``analyze`` says which answer policy each run's accuracy was graded under, and notes runs that
were graded under different ones (their accuracies read different text as the answer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pr1_eval.ingest.importer import import_rows


def _run(root: Path, name: str, policy: str) -> Path:
    """Two problems × 2 samples; per problem one prose answer (read only by ``lenient``) and one
    ``Final Answer:`` line, both right: by hand, accuracy 1.0 under lenient and 0.5 under paper."""
    rows = [{"task": "aime24", "problem_id": f"p{p}", "sample_idx": s, "gold": "7",
             "response": "So the answer is $7$." if s == 0 else "Final Answer: 7"} for p in range(2) for s in range(2)]
    return import_rows(rows, root / name, source="test", workers=0, answer_policy=policy)


def test_runs_table_names_each_runs_policy_and_notes_a_mix(tmp_path: Path) -> None:
    from analysis.runs.loader import load_runs
    from analysis.summary import ANALYSIS_COLUMNS, analyze, to_json

    runs = [_run(tmp_path, "paper-run", "paper"), _run(tmp_path, "lenient-run", "lenient")]
    analysis = analyze(load_runs([str(r) for r in runs], columns=ANALYSIS_COLUMNS))
    table = analysis.runs.set_index("run")
    assert table.loc["paper-run", "answer_policy"] == "paper" and table.loc["lenient-run", "answer_policy"] == "lenient"
    assert table.loc["paper-run", "accuracy"] == pytest.approx(0.5)
    assert table.loc["lenient-run", "accuracy"] == pytest.approx(1.0)
    mixed = [n for n in analysis.notes if "different answer policies" in n]
    assert mixed == ["runs graded under different answer policies (lenient: lenient-run; paper: paper-run): their "
                     "accuracies read different text as the answer and do not compare; `pr1-eval regrade "
                     "--answer-policy` puts them under one"]
    assert {r["run"]: r["answer_policy"] for r in to_json(analysis)["runs"]} == {"paper-run": "paper",
                                                                                 "lenient-run": "lenient"}


def test_one_policy_gives_no_note(tmp_path: Path) -> None:
    from analysis.runs.loader import load_runs
    from analysis.summary import ANALYSIS_COLUMNS, analyze

    runs = [_run(tmp_path, "a", "paper"), _run(tmp_path, "b", "paper")]
    analysis = analyze(load_runs([str(r) for r in runs], columns=ANALYSIS_COLUMNS))
    assert set(analysis.runs["answer_policy"]) == {"paper"}
    assert not [n for n in analysis.notes if "answer policies" in n]
