"""What a reader is told: a run rewritten while it was read is a retry, not damage; a duplicated
key prints as the user wrote it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analysis.runs.loader import load_runs
from pr1_eval.errors import Pr1EvalError
from pr1_eval.records.run import RunRecord, task_entry
from pr1_eval.records.sample import SampleRecord
from pr1_eval.store import run_store as store_module
from pr1_eval.store.run_store import RunStore


def _store(tmp_path: Path, chunks: int = 3) -> RunStore:
    store = RunStore(tmp_path / "run")
    store.write_run(RunRecord(k=1, status="complete", tasks={"t": task_entry(
        [f"p{i}" for i in range(chunks)], 1, version="1", source="test", data_hash=None)}))
    for i in range(chunks):
        store.append([SampleRecord(task="t", problem_id=f"p{i}", sample_idx=0, response="r", gold="1")])
    return store


def test_a_part_swapped_away_while_read_says_retry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As ``regrade`` replaces the parts: the first part is read, then the others are gone."""
    store = _store(tmp_path)
    parts = store.part_paths()
    real = store_module._read_part

    def racing(part: Path, columns: Any = None, threads: bool = True) -> Any:
        result = real(part, columns, threads)
        if part == parts[0]:
            for other in parts[1:]:
                other.unlink()
        return result

    monkeypatch.setattr(store_module, "_read_part", racing)
    with pytest.raises(Pr1EvalError) as caught:
        store.read_table()
    message = str(caught.value)
    assert message.startswith(f"{store.root}: the run changed while it was read") and message.endswith("; retry")
    assert "damaged" not in message


def test_a_damaged_part_that_stays_is_still_damage(tmp_path: Path) -> None:
    store = _store(tmp_path)
    part = store.part_paths()[1]
    part.write_bytes(part.read_bytes()[:40])
    with pytest.raises(Pr1EvalError, match="cut short or not a parquet file.*Rerun the command that made this run"):
        store.read_table()


def test_a_duplicated_key_prints_plain_values(tmp_path: Path) -> None:
    store = _store(tmp_path, chunks=1)
    store.append([SampleRecord(task="t", problem_id="p0", sample_idx=0, response="again", gold="1")])
    expected = f"{store.samples_dir}: duplicated sample key ('t', 'p0', 0); the run store is corrupt"
    with pytest.raises(Pr1EvalError) as caught:
        store.read_frame()
    assert str(caught.value) == expected
    loaded = load_runs(tmp_path / "run", tokenizer=None)  # the analysis' own reader says the same
    assert [reason for _, reason in loaded.failures] == [f"Pr1EvalError: {expected}"]
