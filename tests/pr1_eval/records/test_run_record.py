"""The run record (``run.json``): one typed, versioned record that every writer builds and the
store alone serialises. Checked against files written before the record existed (version 1),
against hand-edited mistakes, and through the commands that write it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from pr1_eval.errors import Pr1EvalError
from pr1_eval.records.run import RUN_RECORD_VERSION, RunRecord, problem_ids_sha256, task_entry
from pr1_eval.store.run_store import RunStore

#: A run.json exactly as pr1-eval wrote it before the record was versioned (the runner's layout).
VERSION_1_RUN = {
    "name": "tiny-forkjoin-k2-seed0",
    "model": {"path": "/ck/exp/global_step_200/actor/hf", "revision": None, "step": 200},
    "engine": {"backend": "hf", "dtype": "float32", "batch_size": 8},
    "decoding": {"mode": "forkjoin", "paths": 2, "max_blocks": 4, "after_last_block": "end"},
    "sampling": {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 64},
    "prompt": {"name": "parallel_r1_v3", "source": "packaged", "sha256": "ab" * 32, "text": "Solve: {problem}"},
    "tasks": {"aime24": {"version": "1", "source": "packaged", "data_hash": "cd" * 32, "n_problems": 2,
                         "problem_ids": ["a0", "a1"], "problem_ids_sha256": problem_ids_sha256(["a0", "a1"]), "k": 2}},
    "k": 2, "seed": 0, "limit": 2, "shard": None,
    "config": {"model": "/ck/exp/global_step_200/actor/hf", "tasks": ["aime24"], "k": 2},
    "command": ["pr1-eval", "run", "--model", "/ck/exp/global_step_200/actor/hf"],
    "packages": {"pr1-eval": "0.1.0", "torch": "2.13.0"},
    "started_at": "2026-11-30T10:00:00+00:00", "finished_at": "2026-11-30T10:05:00+00:00", "status": "complete",
}


def test_a_version_1_run_reads_and_writes_back_every_value() -> None:
    record = RunRecord.from_dict(copy.deepcopy(VERSION_1_RUN))
    assert record.record_version == 1 and record.model.step == 200 and record.task_k("aime24") == 2
    assert record.tasks["aime24"].problem_ids == ["a0", "a1"] and record.backend == "hf" and not record.imported
    written = record.to_dict()
    for key, value in VERSION_1_RUN.items():
        expected = {**value, "family": None} if key == "model" else value
        assert written[key] == expected, key
    assert json.loads(json.dumps(written)) == written  # plain JSON, nothing left as an object


def test_an_imported_version_1_run_keeps_its_import_sections_and_unknown_keys() -> None:
    imported = {"name": "lm", "imported_from": "/x/samples.jsonl", "model": {"path": None, "revision": None, "step": None},
                "engine": {"backend": "lm-eval", "model": "hf"}, "decoding": {"mode": "unknown"}, "sampling": None,
                "prompt": None, "tasks": {"aime24": {"n_problems": 3, "k": None}}, "k": 4, "k_option": {"aime24": 4},
                "samples_left_out_by_k": 12, "lm_eval": [{"lm_eval_task": "pr1_aime24", "repeats": 4}],
                "converted_by": "analysis.real_data", "status": "complete"}
    record = RunRecord.from_dict(copy.deepcopy(imported))
    assert record.imported and record.task_k("aime24") == 4 and record.extra == {"converted_by": "analysis.real_data"}
    assert record.tasks["aime24"].problem_ids is None and record.tasks["aime24"].n_problems == 3
    written = record.to_dict()
    for key in ("imported_from", "k_option", "samples_left_out_by_k", "lm_eval", "converted_by", "prompt", "sampling"):
        assert written[key] == imported[key], key


def test_the_store_round_trips_the_record_and_stamps_the_version(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    record = RunRecord.from_dict(copy.deepcopy(VERSION_1_RUN))
    store.write_run(record)
    on_disk = json.loads(store.run_json_path.read_text())
    assert on_disk["record_version"] == RUN_RECORD_VERSION == 2
    again = store.read_run()
    assert record.record_version == 1 and again.record_version == 2 and again.to_dict() == record.to_dict()
    assert again.model == record.model and again.tasks == record.tasks and again.prompt == record.prompt


@pytest.mark.parametrize(("change", "field_name", "problem"), [
    ({"k": "sixteen"}, "k", "must be an integer"),
    ({"k": True}, "k", "must be an integer"),
    ({"model": "org/model"}, "model", "must be a JSON object"),
    ({"model": {"path": "m", "step": "latest"}}, "model.step", "must be an integer"),
    ({"tasks": {"aime24": {"problem_ids": "a0,a1"}}}, "tasks.aime24.problem_ids", "must be a JSON list"),
    ({"tasks": {"aime24": {"k": 2.5}}}, "tasks.aime24.k", "must be an integer"),
    ({"decoding": ["forkjoin"]}, "decoding", "must be a JSON object"),
    ({"record_version": 9}, "record_version", "newer than this pr1-eval reads"),
    ({"position_unit": "words"}, "position_unit", "must be one of token, char"),
])
def test_a_bad_field_is_one_error_naming_file_and_field(tmp_path: Path, change: dict, field_name: str,
                                                        problem: str) -> None:
    (tmp_path / "run.json").write_text(json.dumps({**VERSION_1_RUN, **change}))
    with pytest.raises(Pr1EvalError) as caught:
        RunStore(tmp_path).read_run()
    message = str(caught.value)
    assert message.startswith(str(tmp_path / "run.json")) and f"field {field_name!r}" in message and problem in message


def test_lenient_numbers_json_tools_write() -> None:
    record = RunRecord.from_dict({"k": 16.0, "model": {"step": "300"}, "tasks": {"t": {"n_problems": 30.0}}})
    assert (record.k, record.model.step, record.tasks["t"].n_problems) == (16, 300, 30)


def test_a_run_json_that_is_not_an_object(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("[1, 2]")
    with pytest.raises(Pr1EvalError, match="not a run record"):
        RunStore(tmp_path).read_run()


def test_task_entry_is_what_the_writers_record() -> None:
    entry = task_entry(["b", "a"], 4, version="2", source="packaged", data_hash="h")
    assert (entry.n_problems, entry.problem_ids, entry.k) == (2, ["b", "a"], 4)
    assert entry.problem_ids_sha256 == problem_ids_sha256(["b", "a"]) != problem_ids_sha256(["a", "b"])


def test_with_sections_types_known_sections_and_keeps_the_rest() -> None:
    record = RunRecord(name="r").with_sections({"engine": {"backend": "lm-eval"}, "sampling": {"temperature": 0.6},
                                                "converted_by": "me"})
    assert record.backend == "lm-eval" and record.imported and record.sampling == {"temperature": 0.6}
    assert record.extra == {"converted_by": "me"} and record.to_dict()["converted_by"] == "me"


def test_position_unit_is_optional_and_round_trips(tmp_path: Path) -> None:
    """Added to version 2 without a bump: files without it read as "not recorded" and are written
    back without it; a recorded unit survives the store."""
    old = RunRecord.from_dict(copy.deepcopy(VERSION_1_RUN))
    assert old.position_unit is None and "position_unit" not in old.to_dict()
    store = RunStore(tmp_path / "run")
    store.write_run(RunRecord.from_dict({**VERSION_1_RUN, "position_unit": "token"}))
    assert json.loads(store.run_json_path.read_text())["position_unit"] == "token"
    assert store.read_run().position_unit == "token"
