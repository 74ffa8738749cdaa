"""``records_to_table``: the column-wise build gives exactly the table the row-wise build gave."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pr1_eval.records.sample import SAMPLE_SCHEMA, SampleRecord, records_to_table


def _row_wise(records: list[SampleRecord]) -> pa.Table:
    """The reference: one deep-copied dict per record, converted row by row."""
    return pa.Table.from_pylist([dataclasses.asdict(r) for r in records], schema=SAMPLE_SCHEMA)


def _records() -> list[SampleRecord]:
    """Records that exercise every kind of column: lists (full, empty, None), None scalars, floats."""
    full = SampleRecord(
        task="aime24", problem_id="p1", sample_idx=3, response="<Parallel><Path>a</Path></Parallel>",
        n_prompt_tokens=12, n_response_tokens=40, gold="5", extracted_answer="5", answer_source="final_answer",
        correct=True, correct_paper=False, grade_status="ok", answer_class=0, has_parallel=True, n_blocks=2,
        paths_per_block=[2, 3], block_char_starts=[0, 50], block_char_ends=[40, 90],
        block_token_starts=[0, 11], block_token_ends=[9, 20], block_rel_starts=[0.0, 0.55],
        reward=1.0, reward_acc=True, reward_info='{"pred": "5"}', position_unit="token",
    )
    bare = SampleRecord(task="math500", problem_id="p2", sample_idx=0)  # defaults: [] lists, None scalars
    failed = SampleRecord(
        task="math500", problem_id="p2", sample_idx=1, correct=None, grade_status="timeout",
        grade_error="no verdict within 10s", block_token_starts=None, block_token_ends=None,
        paths_per_block=[], block_rel_starts=[0.25], reward=-0.5,
    )
    return [full, bare, failed]


@pytest.mark.parametrize("count", [0, 1, 3])
def test_same_table_as_row_wise_build(count: int) -> None:
    records = _records()[:count]
    table = records_to_table(records)
    assert table.schema.equals(SAMPLE_SCHEMA, check_metadata=True)
    assert table.equals(_row_wise(records), check_metadata=True)


def test_values_round_trip_through_parquet(tmp_path) -> None:  # type: ignore[no-untyped-def]
    records = _records()
    pq.write_table(records_to_table(records), tmp_path / "part.parquet")
    back = [SampleRecord.from_row(row) for row in pq.read_table(tmp_path / "part.parquet").to_pylist()]
    assert back == records
    assert back[2].block_token_starts is None and back[1].paths_per_block == []


def test_table_does_not_alias_the_records() -> None:
    """The shallow read shares lists with the records; the table must still own its values."""
    records = _records()
    table = records_to_table(records)
    records[0].paths_per_block.append(99)
    records[0].block_rel_starts[0] = 7.0
    assert table.column("paths_per_block").to_pylist()[0] == [2, 3]
    assert table.column("block_rel_starts").to_pylist()[0] == [0.0, 0.55]
