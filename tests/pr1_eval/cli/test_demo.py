"""The demo never refuses, and never destroys, the run an older demo left in its folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pr1_eval.records.run import RunRecord
from pr1_eval.store.run_store import RunStore


def test_an_older_demo_run_is_moved_aside_not_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import pr1_eval.cli.report
    import pr1_eval.generate.runner
    from pr1_eval.cli.demo import run_demo

    old = RunRecord(status="complete", k=4, sampling={"temperature": 1.0, "max_new_tokens": 160})
    RunStore(tmp_path / "run").write_run(old)
    seen: list[Any] = []
    monkeypatch.setattr(pr1_eval.generate.runner, "run_eval", lambda config: seen.append(config) or tmp_path / "run")
    monkeypatch.setattr(pr1_eval.cli.report, "print_report", lambda out: None)
    run_demo(tmp_path, prompt=None)
    (aside,) = (tmp_path / ".replaced").glob("run.replaced-*")
    assert RunStore(aside).read_run().sampling == old.sampling  # the old run, intact
    assert not (tmp_path / "run").exists() and seen  # the new demo writes a fresh run
    assert f"moved it aside to {aside}" in capsys.readouterr().out
