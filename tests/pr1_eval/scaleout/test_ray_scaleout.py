"""``--ray`` on a real Ray cluster on the loopback interface (2 CPUs), with the trained tiny model.

What is checked, against a single-process run of the same settings computed in this module:
two HF replicas produce the same samples key for key and response for response (chunks of one
problem and per-request seeds make a sample independent of the replica that ran it); a replica
killed mid-run — ``ray.kill`` of its actor, and a SIGKILL of its worker process — still leaves a
complete run with exactly n×k samples, none lost or duplicated, and the summary counts the retried
chunks; ``pr1-eval run --ray ADDRESS`` joins a running cluster, prints the note, and leaves no
replica behind. The cluster listens on 127.0.0.1 only and every process it started is gone after.
The queue and replica-planning logic is checked with pure tests at the end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pr1_eval.errors import Pr1EvalError
from pr1_eval.generate.runner import RunConfig, run_eval
from pr1_eval.scaleout.queue import Chunk, WorkQueue, guided_sizes, plan_chunks, simulate_queue, simulate_static
from pr1_eval.store.run_store import RunStore
from tests.support.deadlines import scaled

ray = pytest.importorskip("ray")
from pr1_eval.scaleout.ray_pool import REPLICA_PREFIX, plan_replicas, start_local_cluster  # noqa: E402

KEY = ["task", "problem_id", "sample_idx"]
TASKS, LIMIT, K = ["aime24", "amc23"], 6, 2


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A one-node cluster on 127.0.0.1; afterwards every process it started must be gone."""
    import psutil

    assert not ray.is_initialized(), "a test before this module left Ray connected: it must shut its cluster down"
    start_local_cluster(num_cpus=2)
    node = ray._private.worker._global_node
    address = ray.get_runtime_context().gcs_address
    assert address.startswith("127.0.0.1:") and all(n["NodeManagerAddress"] == "127.0.0.1" for n in ray.nodes())
    started = [p.process.pid for infos in node.all_processes.values() for p in infos if p.process is not None]
    yield address
    ray.shutdown()
    deadline = time.monotonic() + scaled(30)
    while time.monotonic() < deadline and any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
                                              for pid in started):
        time.sleep(0.2)
    assert not [pid for pid in started if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]


@pytest.fixture(scope="module")
def model() -> Path:
    from pr1_eval.testing.tiny_model import cached_tiny_model

    return cached_tiny_model("trained")


def _config(model: Path, out: Path, **kw: Any) -> RunConfig:
    return RunConfig(model=str(model), tasks=TASKS, k=K, limit=LIMIT, max_new_tokens=48, seed=3, engine="hf",
                     data_source="packaged", out=str(out), problems_per_chunk=1, **kw)


@pytest.fixture(scope="module")
def reference(model: Path, tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """The single-process run, on one thread like each replica (CPU numerics depend on threads)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = run_eval(_config(model, tmp_path_factory.mktemp("single") / "run"))
    finally:
        torch.set_num_threads(threads)
    return RunStore(out).read_frame()


def _same_samples(out: Path, reference: pd.DataFrame) -> dict[str, Any]:
    got = RunStore(out).read_frame()  # raises on a duplicated key
    assert len(got) == len(reference) == len(TASKS) * LIMIT * K
    merged = got.merge(reference, on=KEY, suffixes=("", "_ref"))
    assert len(merged) == len(reference)
    assert (merged["response"] == merged["response_ref"]).all()
    info: dict[str, Any] = json.loads((out / "run.json").read_text())
    assert info["status"] == "complete"
    return info


def _listening_addresses(pids: list[int]) -> set[str]:
    import psutil

    return {c.laddr.ip for c in psutil.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN and c.pid in set(pids)}


def test_two_replicas_equal_a_single_process_run(cluster: str, model: Path, reference: pd.DataFrame, tmp_path: Path) -> None:
    out = run_eval(_config(model, tmp_path / "run", ray="auto", replicas=2))
    info = _same_samples(out, reference)
    assert info["engine"]["replicas"] == 2 and info["engine"]["backend"] == "hf"
    scale = info["scaleout"]
    assert (scale["replicas"], scale["chunks"], scale["retried_chunks"], scale["replicas_lost"]) == (2, 12, 0, 0)
    assert ray.is_initialized()  # a cluster the caller connected is left to the caller
    node = ray._private.worker._global_node
    pids = [p.process.pid for infos in node.all_processes.values() for p in infos if p.process is not None]
    addresses = _listening_addresses(pids)
    assert addresses and addresses <= {"127.0.0.1", "::ffff:127.0.0.1"}, addresses


def _alive_replicas() -> list[dict[str, Any]]:
    import ray._private.state as state

    actors = [a for a in state.actors().values() if a["Name"].startswith(REPLICA_PREFIX) and a["State"] == "ALIVE"]
    return sorted(actors, key=lambda a: a["StartTime"])


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ray.kill", "SIGKILL"])
def test_a_replica_killed_mid_run_still_gives_a_complete_run(cluster: str, model: Path, reference: pd.DataFrame,
                                                             tmp_path: Path, how: str) -> None:
    out = tmp_path / "run"
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["out"] = run_eval(_config(model, out, ray="auto", replicas=2))
        except BaseException as exc:  # reported by the assertion below
            result["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    deadline = time.monotonic() + scaled(600)
    alive: list[dict[str, Any]] = []
    while thread.is_alive() and time.monotonic() < deadline:
        alive = _alive_replicas()
        if alive and RunStore(out).part_paths():
            break
        time.sleep(0.02)
    assert thread.is_alive() and alive, "the run ended before a replica could be killed"
    parts_at_kill = len(RunStore(out).part_paths())
    # The first replica up has held one or two chunks since the first was handed out, and keeps
    # two while more chunks wait than replicas are live — as they do this early in the run.
    victim = alive[0]
    if how == "ray.kill":
        ray.kill(ray.get_actor(victim["Name"]))
    else:
        os.kill(victim["Pid"], signal.SIGKILL)
    thread.join(600)
    assert "error" not in result, result.get("error")
    assert parts_at_kill < len(TASKS) * LIMIT, "the kill should land mid-run"
    scale = _same_samples(out, reference)["scaleout"]
    assert scale["replicas_lost"] >= 1 and scale["retried_chunks"] >= 1, scale
    assert scale["chunks"] == len(TASKS) * LIMIT


@pytest.mark.slow
def test_cli_joins_a_running_cluster_and_leaves_no_replica(cluster: str, model: Path, reference: pd.DataFrame,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "pr1_eval.cli.main", "run", "--model", str(model), "--tasks", ",".join(TASKS), "-k", str(K),
           "--limit", str(LIMIT), "--max-new-tokens", "48", "--seed", "3", "--engine", "hf", "--data-source", "packaged",
           "--out", str(out), "--problems-per-chunk", "1", "--ray", cluster, "--replicas", "2"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=scaled(900))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ray: 2 replica(s), 12 chunk(s), 0 retried" in done.stdout
    _same_samples(out, reference)
    deadline = time.monotonic() + scaled(30)
    while _alive_replicas() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _alive_replicas() == []


def test_ray_options_are_checked_before_anything_starts(model: Path, tmp_path: Path) -> None:
    with pytest.raises(Pr1EvalError, match="need --ray"):
        run_eval(_config(model, tmp_path / "a", replicas=2))
    with pytest.raises(Pr1EvalError, match="greedy decoding.*pass -k 1"):
        run_eval(_config(model, tmp_path / "b", temperature=0.0))
    from pr1_eval.engines.vllm_engine import vllm_available
    from pr1_eval.generate.plan import build_plan

    assert not vllm_available()
    with pytest.raises(Pr1EvalError, match="vllm is not installed"):
        build_plan(dataclasses.replace(_config(model, tmp_path / "c"), engine="vllm"))
    build_plan(dataclasses.replace(_config(model, tmp_path / "c", ray="auto"), engine="vllm"))  # loads in replicas


# ----------------------------------------------------------------------------------- pure parts
def test_plan_replicas() -> None:
    gpu_node = {"GPU": 8.0, "CPU": 64.0}
    assert plan_replicas(None, None, gpu_node) == (8, 1)
    assert plan_replicas(None, 2, gpu_node) == (4, 2)
    assert plan_replicas(None, None, gpu_node, tensor_parallel=4) == (2, 4)
    assert plan_replicas(3, None, {"CPU": 2.0}) == (3, 0)
    assert plan_replicas(None, None, {"CPU": 2.0}) == (2, 0)
    with pytest.raises(Pr1EvalError, match="no GPUs"):
        plan_replicas(None, 1, {"CPU": 2.0})
    with pytest.raises(Pr1EvalError, match="disagree"):
        plan_replicas(None, 2, gpu_node, tensor_parallel=4)


def _chunks(n: int) -> list[Chunk]:
    return plan_chunks({"t": [(i, [0, 1]) for i in range(n)]}, 1)


def test_work_queue_requeues_a_lost_replicas_chunks_first_and_completes_each_once() -> None:
    queue = WorkQueue(_chunks(5))
    a0, a1, b0 = queue.take(0), queue.take(0), queue.take(1)
    assert (a0 and a1 and b0) and [a0.id, a1.id, b0.id] == [0, 1, 2] and queue.held(0) == 2
    assert queue.release(0, "killed") == [0, 1]
    assert queue.held(0) == 0 and queue.pending == 4 and queue.retried == {0, 1}
    first, second = queue.take(1), queue.take(1)
    assert first and second and [first.id, second.id] == [0, 1]  # the lost chunks, in order, before chunk 3
    assert not queue.complete(0, 0)  # a late answer from the lost replica is not stored
    assert queue.complete(0, 1) and not queue.complete(0, 1)
    for cid in (1, 2):
        assert queue.complete(cid, 1)
    rest = [queue.take(1), queue.take(1)]
    assert queue.take(1) is None and all(c and queue.complete(c.id, 1) for c in rest) and queue.finished


def test_a_chunk_that_keeps_failing_stops_the_run() -> None:
    queue = WorkQueue(_chunks(1), max_attempts=2)
    for attempt in range(2):
        chunk = queue.take(attempt)
        assert chunk is not None
        if attempt == 0:
            queue.requeue(chunk.id, "out of memory")
    with pytest.raises(Pr1EvalError, match="failed 2 times, last: out of memory"):
        queue.requeue(0, "out of memory")


def test_plan_chunks_keeps_tasks_apart_and_guided_sizes_shrink() -> None:
    chunks = plan_chunks({"a": [(0, [0]), (1, [0, 1]), (2, [1])], "b": [(0, [0])]}, 2)
    assert [(c.task, [i for i, _ in c.items], c.n_samples) for c in chunks] == [("a", [0, 1], 3), ("a", [2], 1), ("b", [0], 1)]
    # what remains / (2 × replicas), capped, at least one: 20/4 → 5, 15/4 → 4, 11/4 → 3, 8/4 → 2, 6/4 → 2, then ones
    assert guided_sizes(20, 2, 8) == [5, 4, 3, 2, 2, 1, 1, 1, 1]
    assert guided_sizes(20, 2, 3) == [3, 3, 3, 3, 2, 2, 1, 1, 1, 1] and guided_sizes(0, 4, 8) == []
    todo = {"a": [(i, [0]) for i in range(10)], "b": [(i, [0]) for i in range(10)]}
    guided = plan_chunks(todo, 8, replicas=2)  # 20 → 5, 15 → 4, then a's last one; 10 left → 3, 2, 2, 1, 1, 1
    assert [(c.task, len(c.items)) for c in guided] == [("a", 5), ("a", 4), ("a", 1), ("b", 3), ("b", 2), ("b", 2),
                                                       ("b", 1), ("b", 1), ("b", 1)]


def test_scheduling_simulation_by_hand() -> None:
    times = [10.0, 1.0, 1.0, 1.0, 10.0, 1.0]
    # queue: r0 takes 10; r1 takes 1,1,1 (t=3) then 10 (t=13); r0 at t=10 takes the last 1 → makespan 13
    queued = simulate_queue(times, 2)
    assert queued.makespan == 13.0 and queued.idle_share == pytest.approx(1 - 24 / 26)
    # static round robin: r0 gets 10,1,10 = 21, r1 gets 1,1,1 = 3
    static = simulate_static(times, 2)
    assert static.makespan == 21.0 and static.idle_share == pytest.approx(1 - 24 / 42)
