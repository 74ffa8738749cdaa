"""A part without a required column is an error naming the part and the fix, never read as
nulls: the audit dropped ``correct`` from a part and ``report`` gave mean@4 0.000 instead of 0.467,
marked complete. Only the columns newer versions added may be absent (older runs lack them)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from pr1_eval.ingest.importer import import_jsonl
from pr1_eval.records.sample import ADDED_COLUMNS
from pr1_eval.store.run_store import RunStore


def _run(tmp_path: Path) -> Path:
    """Two problems, four samples each, 5 of 8 right (mean@4 = (3/4 + 2/4) / 2 = 0.625)."""
    rows = [{"task": "t", "problem_id": f"p{p}", "sample_idx": i, "gold": "7",
             "response": f"Final Answer: {7 if right else 8}"}
            for p, rights in enumerate(([1, 1, 1, 0], [1, 0, 1, 0])) for i, right in enumerate(rights)]
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return import_jsonl(source, tmp_path / "run", workers=0)


def _drop(run: Path, column: str) -> Path:
    (part,) = RunStore(run).part_paths()
    pq.write_table(pq.read_table(part).drop([column]), part)
    return part


def test_a_part_without_correct_is_refused_naming_it_and_regrade_restores_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path)
    stored = RunStore(run).read_table(columns=["correct"]).column("correct").to_pylist()
    assert stored == [True, True, True, False, True, False, True, False]
    part = _drop(run, "correct")
    capsys.readouterr()
    assert main(["report", str(run), "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"{part}: column 'correct' is missing" in err and f"pr1-eval regrade {run}" in err
    assert main(["regrade", str(run), "--grade-workers", "0"]) == 0
    assert RunStore(run).read_table(columns=["correct"]).column("correct").to_pylist() == stored
    capsys.readouterr()
    assert main(["report", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tasks"]["t"]["mean@4"] == pytest.approx(0.625)


def test_a_missing_column_regrade_cannot_remake_says_to_restore(tmp_path: Path) -> None:
    run = _run(tmp_path)
    part = _drop(run, "sample_idx")
    with pytest.raises(Pr1EvalError, match=rf"{part}: column 'sample_idx' is missing.*restore the part"):
        RunStore(run).read_table()


@pytest.mark.parametrize("column", sorted(ADDED_COLUMNS))
def test_a_column_added_by_a_newer_version_may_be_absent(tmp_path: Path, column: str) -> None:
    run = _run(tmp_path)
    _drop(run, column)
    assert RunStore(run).read_table().num_rows == 8


#: The columns every part has held since the first run format. A new SampleRecord field is in
#: neither this set nor ADDED_COLUMNS until someone decides: a field left out of ADDED_COLUMNS would
#: make every run stored before it unreadable ("column ... is missing").
FIRST_FORMAT = {
    "answer_class", "answer_source", "block_char_ends", "block_char_starts", "block_rel_starts", "block_token_ends",
    "block_token_starts", "correct", "correct_paper", "critical_path_tokens", "engine_calls",
    "engine_inserted_tokens", "extracted_answer", "finish_reason", "format_error", "format_ok", "gold",
    "grade_error", "grade_status", "has_parallel", "n_blocks", "n_prompt_tokens", "n_response_tokens",
    "paths_per_block", "position_unit", "problem", "problem_id", "prompt_hash", "response", "sample_idx", "task",
    "task_version"}


def test_every_new_sample_field_is_declared_optional_for_older_runs() -> None:
    from pr1_eval.records.sample import SAMPLE_COLUMNS

    assert set(SAMPLE_COLUMNS) - ADDED_COLUMNS == FIRST_FORMAT, (
        "a SampleRecord field added since the first format must be listed in ADDED_COLUMNS "
        "(pr1_eval/records/sample.py), or runs stored before it stop reading")
