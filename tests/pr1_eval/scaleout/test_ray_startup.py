"""Ray's fixed start-up wait is retried, nothing else is; and Ray still has that wait (read from its source)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pr1_eval.scaleout import ray_startup


def test_a_start_that_timed_out_is_tried_again_and_its_retry_said(capsys: pytest.CaptureFixture[str]) -> None:
    tries: list[int] = []
    cleaned: list[int] = []

    def start() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise Exception(f"{ray_startup.RAY_START_TIMEOUT}. This could happen because …")
        return "started"

    assert ray_startup.start_with_retries(start, lambda: cleaned.append(1), "a local Ray cluster") == "started"
    assert len(tries) == 3 and len(cleaned) == 2
    err = capsys.readouterr().err
    assert "a local Ray cluster: Ray's node did not come up within its fixed 30 s" in err and "(3 of 3)" in err


def test_the_last_timeout_and_any_other_error_are_raised_as_they_were() -> None:
    def timed_out() -> None:
        raise Exception(ray_startup.RAY_START_TIMEOUT)

    with pytest.raises(Exception, match=ray_startup.RAY_START_TIMEOUT):
        ray_startup.start_with_retries(timed_out, lambda: None, "x")
    calls: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise ValueError("bad address")

    with pytest.raises(ValueError, match="bad address"):
        ray_startup.start_with_retries(broken, lambda: None, "x")
    assert calls == [1]  # not tried again


def test_ray_still_waits_a_fixed_30_s_with_this_message() -> None:
    """If a Ray upgrade makes the wait configurable or rewords it, this says so (and the retry should follow)."""
    spec = importlib.util.find_spec("ray")
    assert spec is not None and spec.origin is not None
    source = (Path(spec.origin).parent / "_private" / "node.py").read_text(encoding="utf-8")
    assert f"raylet_start_wait_time_s = {ray_startup.RAY_START_WAIT_S}" in source
    assert f'"{ray_startup.RAY_START_TIMEOUT}. This "' in source
