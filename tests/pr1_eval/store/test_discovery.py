"""Run discovery, one rule for every command: any depth below a root, never inside a run, no
symbolic links followed, orphans (samples without run.json) named."""

from __future__ import annotations

from pathlib import Path

from pr1_eval.records.run import RunRecord
from pr1_eval.store.discovery import find_runs, is_run, scan_runs
from pr1_eval.store.run_store import RunStore


def _run(folder: Path) -> Path:
    RunStore(folder).write_run(RunRecord(k=1, status="complete"))
    return folder


def test_runs_are_found_at_every_depth_in_path_order(tmp_path: Path) -> None:
    # the layouts pr1-eval writes: runs/RUN, a sweep's runs/STEP, import-verl's RUNS_ROOT/{train,val}/step-N
    expected = [_run(tmp_path / "a-run"), _run(tmp_path / "job" / "train" / "step-000010"),
                _run(tmp_path / "job" / "val" / "step-000010"), _run(tmp_path / "sweep" / "step100"),
                _run(tmp_path / "sweep" / "step200")]
    (tmp_path / "empty" / "deeper").mkdir(parents=True)
    assert find_runs(tmp_path) == expected
    assert find_runs(tmp_path / "sweep" / "step100") == [tmp_path / "sweep" / "step100"]  # a run is its own result


def test_the_walk_stops_at_a_run_and_at_links(tmp_path: Path) -> None:
    outer = _run(tmp_path / "outer")
    _run(outer / "nested")  # a run.json inside a run is the run's own file, not a second run
    (outer / "samples.parquet").mkdir()
    real = _run(tmp_path / "elsewhere" / "real")
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "to-real").symlink_to(real)
    (tmp_path / "linked" / "loop").symlink_to(tmp_path)
    assert find_runs(tmp_path) == [real, outer]
    assert find_runs(tmp_path / "linked") == []


def test_orphans_are_folders_with_samples_and_no_run_json(tmp_path: Path) -> None:
    run = _run(tmp_path / "good")
    (run / "samples.parquet").mkdir()
    (tmp_path / "lost" / "samples.parquet").mkdir(parents=True)
    (tmp_path / "lost" / "samples.parquet" / "part-0.parquet").write_bytes(b"")
    found = scan_runs(tmp_path)
    assert found.runs == [run] and found.orphans == [tmp_path / "lost"]
    assert scan_runs(tmp_path / "lost").orphans == [tmp_path / "lost"]  # a root can be an orphan itself
    assert scan_runs(tmp_path / "missing").runs == [] and not is_run(tmp_path / "lost")
