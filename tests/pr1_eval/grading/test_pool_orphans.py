"""A grading pool's workers end with the process that started them, even one killed outright
(SIGKILL runs no ``close``) and even a worker stuck in an item, which never reads the EOF its
parent's death leaves on its socket (its watchdog thread sees the parent's pid change)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.processes import alive

_POOL_THEN_KILLED = """
import time
from pr1_eval.grading.pool import GradingPool
from pr1_eval.grading.verify import HANG_ANSWER
pool = GradingPool(2, warm=False, test_hooks=True)
stuck = pool.submit("1", HANG_ANSWER, timeout_s=120)
pool.submit("1", "1").result()
while not stuck.running() or len(pool.worker_pids) < 2:
    time.sleep(0.05)
print(" ".join(map(str, pool.worker_pids)), flush=True)
time.sleep(300)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_workers_of_a_killed_parent_end_idle_or_stuck() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _POOL_THEN_KILLED], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[3])
    try:
        assert parent.stdout is not None
        workers = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(workers) == 2 and all(alive(pid) for pid in workers)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 6.0  # the watchdog looks every 2 s
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in workers if alive(pid)]
    for pid in left:
        os.kill(pid, 9)
    assert not left
