"""Each fact about a run is read once per load: its file signature (a stat of every file) and its
run.json, whatever the load asks for (blocks parsed, from the block cache, or counted only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import analysis.runs.index as index
from analysis.runs.index import RunEntry, discover_runs, run_signature
from analysis.runs.loader import load_runs
from pr1_eval.store.run_store import RunStore
from tests.support.analysis_fixtures import block, make_record, response, write_run


def _runs(root: Path) -> Path:
    text = response("a", block(["x = 1", "x = 2"]), final="2")
    for name in ("r1", "r2"):
        write_run(root / "runs", name, [make_record("t", f"p{i}", 0, text) for i in range(3)])
    return root / "runs"


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    calls: dict[str, list[Any]] = {"signature": [], "record": []}
    real_signature, real_read = index.run_signature, RunStore.read_run

    def signature(run_dir: str | Path) -> Any:
        calls["signature"].append(Path(run_dir).name)
        return real_signature(run_dir)

    def read_run(self: RunStore) -> Any:
        calls["record"].append(Path(self.root).name)
        return real_read(self)

    monkeypatch.setattr(index, "run_signature", signature)
    monkeypatch.setattr(RunStore, "read_run", read_run)
    return calls


@pytest.mark.parametrize("blocks", [True, False])
def test_a_load_stats_each_run_once_and_reads_its_run_json_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               blocks: bool) -> None:
    monkeypatch.setenv("PR1_LOADER_CACHE", str(tmp_path / "cache"))
    runs = _runs(tmp_path)
    for _ in ("cold cache", "warm cache"):
        calls = _counting(monkeypatch)
        loaded = load_runs(runs, tokenizer=None, blocks=blocks, columns=None if blocks else ["correct"])
        assert sorted(loaded.samples["run"].unique()) == ["r1", "r2"]
        assert sorted(calls["signature"]) == ["r1", "r2"], calls  # before: three stats of every file per run
        assert sorted(calls["record"]) == ["r1", "r2"], calls  # before: run.json read twice
        monkeypatch.undo()
        monkeypatch.setenv("PR1_LOADER_CACHE", str(tmp_path / "cache"))


def test_an_entry_keeps_what_it_read(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    found, failures = discover_runs([runs, tmp_path / "absent"])
    assert [p.name for p in found] == ["r1", "r2"] and failures == [(str(tmp_path / "absent"), "does not exist")]
    entry = RunEntry(found[0])
    first = entry.signature
    assert first == run_signature(found[0]) and len(first) == 2  # run.json and one samples part
    (found[0] / "run.json").touch()  # the run changes after the entry read it: the entry keeps its state
    assert entry.signature is first and run_signature(found[0]) != first
    assert entry.record is entry.record and entry.record.tasks
