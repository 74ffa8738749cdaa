"""The grading bar's first figures: its clock starts at the first answer, after the workers start.

An import printed ``1/243 [00:05<20:25, 5.06s/answer]`` (five seconds of worker start-up read as
the rate) and finished in a second. Here the first answer takes 1 s and the other 29 arrive at
once: every ETA the bar prints must be a few seconds at most (the old bar printed 29 s)."""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import Future

import pytest

from pr1_eval.grading.grade import _wait


def test_the_bar_does_not_extrapolate_worker_start_up(capsys: pytest.CaptureFixture[str]) -> None:
    futures: list[Future[object]] = [Future() for _ in range(30)]

    def answer() -> None:
        time.sleep(1.0)  # the workers start
        for future in futures:
            future.set_result("verdict")
            time.sleep(0.01)

    threading.Thread(target=answer, daemon=True).start()
    assert _wait(futures, progress=True) == ["verdict"] * 30  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert "grading" in err and "30/30" in err
    etas = [int(m) * 60 + int(s) for m, s in re.findall(r"<(\d+):(\d+)", err)]
    assert etas and max(etas) <= 3, err
