"""``TrainingSection``: the sections both writers stored before the record existed read back and are
written back key for key, in order; a malformed one is refused with the file and key named."""

from __future__ import annotations

import json

import pytest

from pr1_eval.errors import Pr1EvalError
from pr1_eval.records.run import RunRecord
from pr1_eval.records.training import DumpSource, TrainingSection

SUMMARY = {"version": 1, "n_samples": 12, "n_problems": 3, "k": 4, "reward_mean": 0.0, "accuracy": 0.5,
           "best_at_k": 0.8723958333333334, "parallel_ratio": 0.5, "blocks_per_response": 0.5,
           "first_block_rel_pos": 0.13665977301995538, "response_tokens_mean": 78.25, "truncated_ratio": 0.25,
           "critical_path_mean": 165.91666666666666, "speedup": 1.12054244098443, "length_unit": "char"}
#: A summary stored before the token-latency keys existed.
OLD_SUMMARY = {key: value for key, value in SUMMARY.items() if key not in ("critical_path_mean", "speedup", "length_unit")}
#: As ``import-verl`` wrote it (copied from a run.json written before the record existed).
IMPORTED = ('{"job": "Parallel-R1-S1", "kind": "train", "step": 1, "format": "parallel-r1", "tags_kept": true, '
            '"structure_measurable": true, "structure_note": null, "source": {"file": "/d/rollout-log/1.jsonl", '
            '"size": 134093, "mtime_ns": 1796335926856484690, "sha256": "6002"}, "rows": 12, '
            '"padding_rows_dropped": 0, "earlier_turns_dropped": 0, "groups": 3, "problems_matched": 0, '
            '"problems_unmatched": 3, "rows_with_other_step": 0, "lengths": {"max_prompt_length": 900, '
            '"max_response_length": 160}, "tokenizer": null, "summary": ' + json.dumps(SUMMARY) + '}')
#: As repro's rollout writer wrote a step still running, and one of a stage with a reward switch.
RUNNING = ('{"job": "job", "kind": "validation", "step": 4, "format": "repro", "tags_kept": true, '
           '"structure_measurable": true, "attempt": "B", "expected_rows": null, "rows_seen": 3, "rows_stored": 3, '
           '"every": 1}')
SWITCHED = ('{"job": "job", "kind": "train", "step": 2, "format": "repro", "tags_kept": true, '
            '"structure_measurable": true, "attempt": "A", "expected_rows": 12, "rows_seen": 7, "rows_stored": 7, '
            '"every": 1, "reward_mode": "mid_training", "switch_step": 5}')


@pytest.mark.parametrize("text", [IMPORTED, RUNNING, SWITCHED, IMPORTED.replace(json.dumps(SUMMARY), json.dumps(OLD_SUMMARY))])
def test_stored_sections_read_and_write_back_key_for_key(text: str) -> None:
    section = TrainingSection.from_json(json.loads(text))
    assert section is not None
    assert json.dumps(section.to_json()) == text  # same keys, same order, same nulls


def test_the_fields_are_the_stored_values() -> None:
    section = TrainingSection.from_json(json.loads(IMPORTED))
    assert section is not None
    assert (section.job, section.kind, section.step, section.rows, section.tokenizer) == (
        "Parallel-R1-S1", "train", 1, 12, None)
    assert section.source == DumpSource(file="/d/rollout-log/1.jsonl", size=134093, mtime_ns=1796335926856484690,
                                        sha256="6002")
    assert section.summary is not None and section.summary.to_json() == SUMMARY and section.attempt is None
    assert (section.summary.k, section.summary.accuracy, section.summary.length_unit) == (4, 0.5, "char")
    running = TrainingSection.from_json(json.loads(RUNNING))
    assert running is not None and running.expected_rows is None and running.summary is None


def test_unknown_keys_are_kept_and_written_last() -> None:
    data = {**json.loads(SWITCHED), "from_the_future": [1, 2]}
    section = TrainingSection.from_json(data)
    assert section is not None and section.extra == {"from_the_future": [1, 2]}
    assert list(section.to_json()) == list(data)


def test_tags_not_recorded_read_as_kept() -> None:
    bare = TrainingSection(kind="train", step=3)
    assert bare.kept_tags and bare.measurable and bare.to_json() == {"kind": "train", "step": 3}
    assert not TrainingSection(kind="train", step=3, tags_kept=False).measurable
    assert not TrainingSection(kind="train", step=3, structure_measurable=False).measurable


@pytest.mark.parametrize(("change", "key"), [
    ({"kind": "rollouts"}, "training.kind"),
    ({"step": None}, "training.step"),
    ({"rows": "twelve"}, "training.rows"),
    ({"tags_kept": "yes"}, "training.tags_kept"),
    ({"source": {"file": "/d/1.jsonl", "size": [1]}}, "training.source.size"),
    ({"summary": [1]}, "training.summary"),
    ({"summary": {**SUMMARY, "accuracy": "half"}}, "training.summary.accuracy"),
    ({"summary": {**SUMMARY, "k": None}}, "training.summary.k"),
])
def test_a_malformed_section_names_file_and_key(change: dict[str, object], key: str) -> None:
    data = {**json.loads(IMPORTED), **change}
    with pytest.raises(Pr1EvalError, match=rf"runs/x/run.json: field '{key}'"):
        TrainingSection.from_json(data, "runs/x/run.json")


def test_the_run_record_holds_it_typed_and_writes_it_back() -> None:
    info = {"name": "job-train-step-000001", "status": "complete", "training": json.loads(IMPORTED)}
    record = RunRecord.from_dict(info, "r/run.json")
    assert isinstance(record.training, TrainingSection) and record.structure_measurable
    assert json.dumps(record.to_dict()["training"]) == IMPORTED
    with pytest.raises(Pr1EvalError, match=r"r/run.json: field 'training'"):
        RunRecord.from_dict({**info, "training": "train"}, "r/run.json")
