"""``import-verl --follow``: rounds that import each step once it is complete (a later step
exists), wait for a dump folder with no file yet, print only rounds that imported something,
and stop cleanly on Ctrl-C."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.support.verl_dump_fixtures as F
from pr1_eval.cli.import_verl import follow
from pr1_eval.cli.main import main
from pr1_eval.errors import Pr1EvalError
from pr1_eval.ingest.verl_formats import Lengths
from pr1_eval.ingest.verl_import import ImportOptions
from pr1_eval.store.run_store import RunStore

OPTS = ImportOptions(lengths=Lengths(prompt=900, response=160), grade=False)
PROBLEMS = F.training_problems(2)


def steps_imported(out: Path) -> list[int]:
    return sorted(RunStore(d).read_run().model.step or 0 for d in (out / "train").glob("step-*"))  # type: ignore[misc]


def test_follow_imports_each_step_once_a_later_one_lands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dumps, out = tmp_path / "rollout-log", tmp_path / "runs"
    dumps.mkdir()
    seen: list[list[int]] = []

    def job_writes(seconds: float) -> None:  # between rounds, the job writes its next step
        assert seconds == 5
        seen.append(steps_imported(out) if out.exists() else [])
        F.write_fork_step(dumps, len(seen), PROBLEMS, 3, validation=False, seed=len(seen))

    assert follow(str(dumps), str(out), OPTS, 5, rounds=4, sleep=job_writes) == 0
    # round 1: no file; round 2: step 1 waits (the newest); round 3: step 1 in, 2 waits; round 4: 2 in
    assert seen == [[], [], [1]] and steps_imported(out) == [1, 2]
    captured = capsys.readouterr()
    assert "no step file yet; waiting" in captured.err and "step 1 waits" in captured.err
    assert captured.out.count("imported") == 2  # one summary per round that imported a step, none otherwise


def test_ctrl_c_stops_following_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    dumps = tmp_path / "rollout-log"
    for step in (1, 2):
        F.write_fork_step(dumps, step, PROBLEMS, 3, validation=False)

    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("pr1_eval.cli.import_verl.time.sleep", interrupt)
    status = main(["import-verl", str(dumps), "--out", str(tmp_path / "runs"), "--no-grade", "--follow", "0.5",
                   "--max-prompt-length", "900", "--max-response-length", "160"])
    assert status == 0 and steps_imported(tmp_path / "runs") == [1]
    assert "stopped following" in capsys.readouterr().err
    with pytest.raises(Pr1EvalError, match="positive"):
        follow(str(dumps), str(tmp_path / "runs"), OPTS, 0)
