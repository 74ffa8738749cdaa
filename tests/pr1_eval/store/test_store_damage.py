"""A parquet part damaged on disk is detected, named, set aside on resume and never read as data."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pr1_eval.errors import Pr1EvalError
from pr1_eval.records.run import RunRecord, task_entry
from pr1_eval.records.sample import SAMPLE_COLUMNS, SampleRecord
from pr1_eval.report.completeness import check_run
from pr1_eval.store import run_store as store_module
from pr1_eval.store.run_store import RunStore


def _records(problem: int, k: int = 3) -> list[SampleRecord]:
    return [SampleRecord(task="t", problem_id=f"p{problem}", sample_idx=i, response=f"r{problem}-{i}" * 40, gold="1")
            for i in range(k)]


def _store(tmp_path: Path, problems: int = 3) -> RunStore:
    store = RunStore(tmp_path / "run")
    store.write_run(RunRecord(k=3, status="running",
                              tasks={"t": task_entry([f"p{i}" for i in range(problems)], 3, version="1", source="test",
                                                     data_hash=None)}))
    for i in range(problems):
        store.append(_records(i))
    return store


def _cut(path: Path, keep: float = 0.5) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(int(size * keep))


def test_a_part_cut_short_is_named_when_reading(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _cut(store.part_paths()[1])
    with pytest.raises(Pr1EvalError, match=r"part-00001\.parquet: cut short or not a parquet file .* not read as data"):
        store.read_frame()


def test_a_zero_filled_part_and_a_flipped_byte_are_detected(tmp_path: Path) -> None:
    store = _store(tmp_path)
    zeroed, flipped = store.part_paths()[0], store.part_paths()[2]
    zeroed.write_bytes(b"\0" * zeroed.stat().st_size)  # what a crash can leave after a rename
    column = pq.ParquetFile(flipped).metadata.row_group(0).column(SAMPLE_COLUMNS.index("response"))
    data = bytearray(flipped.read_bytes())
    # the middle of the dictionary page that holds the response texts: only its checksum notices
    data[(column.dictionary_page_offset + column.data_page_offset) // 2] ^= 0xFF
    flipped.write_bytes(bytes(data))
    assert [p.name for p, _ in store.damaged_parts()] == ["part-00000.parquet", "part-00002.parquet"]


def test_resume_sets_damaged_parts_aside_so_their_samples_are_regenerated(tmp_path: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    store = _store(tmp_path)
    _cut(store.part_paths()[1])
    (store.samples_dir / ".part-00003.parquet.tmp").write_bytes(b"half")  # a killed writer's temporary file
    with caplog.at_level(logging.WARNING, logger="pr1_eval.store.run_store"):
        finished = store.finished_keys()
    assert finished == {("t", f"p{i}", s) for i in (0, 2) for s in range(3)}
    assert "part-00001.parquet: cut short" in caplog.text and "part-00001.parquet.corrupt-0" in caplog.text
    assert (store.samples_dir / "part-00001.parquet.corrupt-0").is_file()
    assert not list(store.samples_dir.glob("*.tmp"))
    check = check_run(store.root)  # incomplete until the samples are generated again
    assert check.tasks["t"].missing_problems == ["p1"] and not check.complete
    store.append(_records(1))  # what the resumed run does
    frame = store.read_frame()
    assert len(frame) == 9 and sorted(set(frame["problem_id"])) == ["p0", "p1", "p2"]
    assert check_run(store.root).tasks["t"].complete


def test_a_full_disk_while_writing_is_a_clear_error_and_leaves_no_part(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path, problems=1)

    def full_disk(table: object, path: Path) -> None:
        Path(path).write_bytes(b"PAR1 partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_module, "_write_part", full_disk)
    with pytest.raises(Pr1EvalError, match=r"^no space left on .*samples\.parquet \(need about .* while writing "
                                           r"part-00001\.parquet \(3 samples\); .* free some space"):
        store.append(_records(1))
    assert [p.name for p in store.part_paths()] == ["part-00000.parquet"]
    assert not list(store.samples_dir.glob(".*.tmp"))


def test_parts_are_written_with_page_checksums(tmp_path: Path) -> None:
    store = _store(tmp_path, problems=1)
    metadata = pq.ParquetFile(store.part_paths()[0]).metadata
    assert metadata.num_rows == 3
    # reading with verification succeeds on an intact part
    assert pq.read_table(store.part_paths()[0], page_checksum_verification=True).num_rows == 3
