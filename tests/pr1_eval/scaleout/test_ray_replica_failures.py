"""Replicas that fail the way GPU replicas do, on a real local Ray cluster (CPU only).

* A dead engine (the fake vLLM's engine-core process SIGKILLed mid-run, as a CUDA error kills it):
  vLLM then raises ``EngineDeadError`` on every call while the ``LLM`` and the actor live. The run
  must finish with every sample exactly once, the pool must have killed and restarted that
  replica (not retried its chunks there until the run aborts), and the summary must say so.
* A slow restart, time-compressed: a stand-in replica is SIGKILLed and its restart (constructor)
  takes 6 s while the pool's start timeout is 20 s. The old probe loop gave up after 120 failed
  probes (~241 s measured) against a 1,800 s timeout, i.e. after 13 % of it — 2.7 s at this scale —
  so this restart is "longer than today's 4 minutes". It must be waited for, the replica must
  rejoin and take chunks, and the driver must keep handing chunks to the other replica meanwhile.
  A restart longer than the timeout must be given up (the actor killed for good, not left ALIVE).
* An engine load that fails vLLM's free-memory check is retried for a bounded time (fake clock).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pr1_eval.engines.base import SamplingConfig
from pr1_eval.errors import Pr1EvalError
from pr1_eval.generate.runner import RunConfig, run_eval
from pr1_eval.scaleout import summary_note
from pr1_eval.scaleout.loading import load_with_retry
from pr1_eval.scaleout.queue import plan_chunks
from pr1_eval.store.run_store import RunStore
from tests.support.deadlines import scaled

ray = pytest.importorskip("ray")
from pr1_eval.scaleout.ray_pool import REPLICA_PREFIX, RayPool, ReplicaSpec, start_local_cluster  # noqa: E402

TESTS = Path(__file__).resolve().parents[2]
FAKE = TESTS / "fake_vllm"
REPO = TESTS.parent  # workers import tests.support.ray_standins from here
TASKS, LIMIT, K = ["aime24", "amc23"], 10, 2  # 20 one-problem chunks of >= 0.5 s: a run of several seconds


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """A one-node cluster whose workers import the fake vllm and the stand-ins (this process does not)."""
    assert not ray.is_initialized(), "a test before this module left Ray connected"
    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", "FAKE_VLLM_DELAY_S")}
    os.environ["PYTHONPATH"] = os.pathsep.join([str(FAKE), str(REPO), *filter(None, [saved["PYTHONPATH"]])])
    os.environ["FAKE_VLLM_DELAY_S"] = "0.5"
    try:
        start_local_cluster(num_cpus=3)
        yield
    finally:
        ray.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _alive_replicas() -> list[dict[str, Any]]:
    import ray._private.state as state

    actors = [a for a in state.actors().values() if a["Name"].startswith(REPLICA_PREFIX) and a["State"] == "ALIVE"]
    return sorted(actors, key=lambda a: a["StartTime"])


def test_a_dead_engine_is_a_lost_replica_and_the_run_completes(cluster: None, tmp_path: Path) -> None:
    import psutil

    from pr1_eval.testing.tiny_model import cached_tiny_model

    out = tmp_path / "run"
    config = RunConfig(model=str(cached_tiny_model("random")), tasks=TASKS, k=K, limit=LIMIT, max_new_tokens=16, seed=3,
                       engine="vllm", data_source="packaged", out=str(out), problems_per_chunk=1, ray="auto", replicas=2)
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["out"] = run_eval(config)
        except BaseException as exc:  # reported by the assertion below
            result["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    deadline = time.monotonic() + scaled(600)
    alive: list[dict[str, Any]] = []
    while thread.is_alive() and time.monotonic() < deadline:
        alive = _alive_replicas()
        if len(alive) == 2 and RunStore(out).part_paths():
            break
        time.sleep(0.02)
    assert thread.is_alive() and alive, "the run ended before an engine could be killed"
    cores = psutil.Process(alive[0]["Pid"]).children()  # the fake LLM's EngineCore_DP0 process
    assert cores, "the replica has no engine-core process"
    for core in cores:
        os.kill(core.pid, signal.SIGKILL)
    parts_at_kill = len(RunStore(out).part_paths())
    thread.join(600)
    assert "error" not in result, result.get("error")
    assert parts_at_kill < len(TASKS) * LIMIT, "the kill should land mid-run"
    frame = RunStore(out).read_frame()  # raises on a duplicated key
    keys = list(zip(frame["task"], frame["problem_id"], frame["sample_idx"], strict=True))
    assert len(keys) == len(set(keys)) == len(TASKS) * LIMIT * K
    per_problem = frame.groupby(["task", "problem_id"])["sample_idx"].apply(sorted)
    assert len(per_problem) == len(TASKS) * LIMIT and all(list(v) == list(range(K)) for v in per_problem)
    scale = json.loads((out / "run.json").read_text())["scaleout"]
    assert scale["engine_deaths"] == 1 and scale["replicas_lost"] == 1 and scale["retried_chunks"] >= 1, scale["errors"]
    assert scale["chunk_errors"] == 0, scale  # not retried on the dead engine until the run aborts
    assert any("EngineDeadError: EngineCore encountered an issue" in e for e in scale["errors"]), scale["errors"]
    note = summary_note(out)
    assert note is not None and "after 1 replica loss(es) (1 dead engine(s))" in note, note


def _plan(folder: Path, plan: dict[int, dict[str, float]]) -> ReplicaSpec:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plan.json").write_text(json.dumps({str(i): p for i, p in plan.items()}))
    return ReplicaSpec(model=str(folder), engine="stand-in", engine_options={})


def _drive(pool: RayPool, n_chunks: int) -> list[tuple[int, int, int, float, float]]:
    """(chunk id, replica, incarnation, replica's finish time, driver's receive time) per chunk."""
    chunks = plan_chunks({"t": [(i, [0]) for i in range(n_chunks)]}, 1)
    got = []
    for chunk, decoded in pool.results(chunks, lambda c: ([[1, 2]], [f"t/{c.id}"]), 1, SamplingConfig()):
        replica, incarnation, finished = decoded[0][0]
        got.append((chunk.id, replica, incarnation, finished, time.monotonic()))
    return got


def test_a_slow_restart_is_waited_for_while_the_other_replica_keeps_working(cluster: None, tmp_path: Path) -> None:
    from tests.support.ray_standins import ScriptedReplica

    spec = _plan(tmp_path / "state", {0: {"die_at_call": 2, "restart_s": 6.0, "chunk_s": 0.25}, 1: {"chunk_s": 0.25}})
    pool = RayPool(spec, "auto", replicas=2, gpus_per_replica=0, start_timeout_s=20.0, replica_class=ScriptedReplica)
    try:
        pool.wait_ready(2)
        started = time.monotonic()
        got = _drive(pool, 70)
    finally:
        pool.close()
    assert sorted(c for c, *_ in got) == list(range(70))  # every chunk exactly once
    stats = pool.stats
    assert (stats.replicas_lost, stats.replicas_restarted, stats.replicas_given_up) == (1, 1, 0), stats
    # One probe at the start and one after the loss: Ray held it through the restart. The old loop
    # re-sent a probe on every ActorUnavailableError and gave up after 120 of them.
    assert pool.probes_sent == [2, 1]
    back = min(t for _, r, inc, t, _ in got if r == 0 and inc == 2)  # the restarted replica took chunks again
    assert back - started > 6.0
    during = [c for c, r, _, t, _ in got if r == 1 and started + 1.0 < t < back - 1.0]
    assert len(during) >= 10, "the driver stalled while replica 0 restarted"  # 0.25 s chunks over > 4 s
    # The driver received each chunk soon after the replica finished it (no blocking sleep on probes).
    assert max(received - finished for *_, finished, received in got) < 3.0


def test_a_restart_longer_than_the_start_timeout_is_given_up_and_killed(cluster: None, tmp_path: Path) -> None:
    import ray._private.state as state

    from tests.support.ray_standins import ScriptedReplica

    spec = _plan(tmp_path / "state", {0: {"die_at_call": 2, "restart_s": 15.0}, 1: {"chunk_s": 0.2}})
    pool = RayPool(spec, "auto", replicas=2, gpus_per_replica=0, start_timeout_s=4.0, replica_class=ScriptedReplica)
    try:
        pool.wait_ready(2)
        got = _drive(pool, 40)
        victim = pool.actors[0]._actor_id.hex()
    finally:
        pool.close()
    assert sorted(c for c, *_ in got) == list(range(40))
    assert (pool.stats.replicas_lost, pool.stats.replicas_given_up, pool.stats.replicas_restarted) == (1, 1, 0)
    assert pool.states[0] == "dead" and any("not back within 4 s" in e for e in pool.stats.errors)
    deadline = time.monotonic() + scaled(30)
    while state.actors(actor_id=victim)["State"] != "DEAD" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert state.actors(actor_id=victim)["State"] == "DEAD"  # not left to finish its restart and hold resources


# ----------------------------------------------------------------------------------- the memory check
class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture()
def fake_llm(fake_vllm: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    counter = tmp_path / "low-memory"
    monkeypatch.setenv("FAKE_VLLM_LOW_MEMORY", str(counter))
    yield fake_vllm, counter


def test_a_load_that_fails_the_memory_check_is_retried_then_given_up(fake_llm: tuple[Any, Path],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from pr1_eval.testing.tiny_model import cached_tiny_model

    vllm, counter = fake_llm
    model = str(cached_tiny_model("random"))
    clock = _Clock()
    counter.write_text("2")  # the old incarnation's memory is released after two attempts
    llm = load_with_retry(lambda: vllm.LLM(model), 60.0, 0.9, interval_s=10.0, sleep=clock.sleep, clock=lambda: clock.now)
    assert isinstance(llm, vllm.LLM) and clock.sleeps == [10.0, 10.0] and counter.read_text() == "0"
    counter.write_text("100")  # never released: give up after the bounded time, with vLLM's message
    clock = _Clock()
    with pytest.raises(Pr1EvalError, match=r"short of free memory for 60 s \(7 attempt\(s\); Free memory on device"):
        load_with_retry(lambda: vllm.LLM(model), 65.0, 0.9, interval_s=10.0, sleep=clock.sleep, clock=lambda: clock.now)
    assert clock.sleeps == [10.0] * 6
    monkeypatch.setenv("FAKE_VLLM_FAIL", "1")  # any other failure is not retried
    with pytest.raises(RuntimeError, match="fake"):
        load_with_retry(lambda: vllm.LLM(model), 60.0, 0.9, sleep=clock.sleep, clock=lambda: clock.now)
    assert clock.sleeps == [10.0] * 6
    # vLLM's multiprocess engine core reports only "Engine core initialization failed": retried when the GPU is short.
    core_failed = RuntimeError("Engine core initialization failed. See root cause above. Failed core proc(s): {}")
    from pr1_eval.scaleout.loading import is_memory_check_failure

    assert is_memory_check_failure(core_failed, 0.9, lambda u: True)
    assert not is_memory_check_failure(core_failed, 0.9, lambda u: False)
    assert not is_memory_check_failure(core_failed, None, lambda u: True)
