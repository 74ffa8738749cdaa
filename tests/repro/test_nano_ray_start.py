"""A nano stage whose Ray node did not start within Ray's fixed wait is started again; any other failure is not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pr1_eval.errors import Pr1EvalError
from repro.nano import runner
from repro.nano.plan import NanoStage, Scale

METRIC_LINE = "step:1 - actor/pg_loss:0.1 - critic/score/mean:0.5"
RAY_FAILURE = ["Traceback (most recent call last):", f"Exception: {runner.RAY_START_TIMEOUT}. This could happen …"]


def test_only_a_failed_start_without_a_step_is_ray_s_startup_timeout() -> None:
    assert runner.ray_start_timed_out(1, {}, RAY_FAILURE)
    assert not runner.ray_start_timed_out(0, {}, RAY_FAILURE)  # it exited well: not a failure
    assert not runner.ray_start_timed_out(1, {1: {"x": 1.0}}, RAY_FAILURE)  # a step ran: something else failed
    assert not runner.ray_start_timed_out(1, {}, ["Traceback", "ValueError: bad config"])


def _fake_stage(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, outcomes: list[tuple[int, list[str]]]) -> list[str]:
    """``run_stage`` with its VERL run replaced by ``outcomes`` (exit status, log lines), one per start, and its
    merge by a folder name; returns what it echoed."""
    starts = iter(outcomes)

    def fake_stream(argv: list[str], log: Path, env: dict[str, str], echo: Any) -> int:
        status, lines = next(starts)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return status

    monkeypatch.setattr(runner, "stream", fake_stream)
    monkeypatch.setattr(runner, "merge_last", lambda out, log, env, echo: str(out / "global_step_1" / "hf"))
    monkeypatch.setattr(runner, "stage_argv", lambda *a, **k: ["config"])
    return []


def test_a_stage_is_started_again_after_ray_s_startup_timeout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    echoed = _fake_stage(monkeypatch, tmp_path, [(1, RAY_FAILURE), (0, [METRIC_LINE])])
    stage = NanoStage("seen-gsm8k", "rl_gsm8k", "seen-sft", 1)
    result = runner.run_stage(stage, "model", tmp_path, tmp_path / "data", Scale(), echoed.append)
    assert list(result.metrics) == [1]
    assert any("did not come up within its fixed 30 s" in line and "(2 of 3)" in line for line in echoed)


def test_a_stage_that_keeps_timing_out_or_fails_otherwise_is_reported(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    stage = NanoStage("seen-gsm8k", "rl_gsm8k", "seen-sft", 1)
    _fake_stage(monkeypatch, tmp_path, [(1, RAY_FAILURE)] * runner.START_ATTEMPTS)
    with pytest.raises(Pr1EvalError, match="stage seen-gsm8k \\(rl_gsm8k\\) failed: exit 1, 0 of 1 steps logged"):
        runner.run_stage(stage, "model", tmp_path, tmp_path / "data", Scale(), lambda line: None)
    _fake_stage(monkeypatch, tmp_path, [(1, ["ValueError: bad config"]), (0, [METRIC_LINE])])
    with pytest.raises(Pr1EvalError, match="ValueError: bad config"):  # not started again: the second start unused
        runner.run_stage(stage, "model", tmp_path, tmp_path / "data", Scale(), lambda line: None)
