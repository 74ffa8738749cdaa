"""Replicas as Ray actors, fed chunks from a :class:`~pr1_eval.scaleout.queue.WorkQueue`.

Each replica is one actor holding one engine (vLLM with tensor parallelism G, or HF) and the run's
decoder; the driver keeps every replica busy with up to two chunks (one running, one waiting in the
actor's mailbox, so no replica idles while the driver is between results), gets decoded samples
back and stays the only writer of the run store. Why Ray: RL teams already run it (VERL does), it
places actors on GPUs across nodes, and it reports a lost actor as an exception on the driver, so
the queue can hand that replica's chunks to the others.

A replica that dies (``ray.kill``, a SIGKILL, the OOM killer, its node gone) fails its in-flight
calls with a ``RayActorError``: its chunks go back to the front of the queue and the replica is
probed; Ray restarts it up to :data:`MAX_RESTARTS` times (it rejoins once its engine is loaded)
unless it was killed for good, in which case the others finish the run. An exception raised
inside a replica (not a death) is retried on another replica too, except a
:class:`~pr1_eval.errors.Pr1EvalError`, which is bad input and stops the run with its message.

A replica whose *engine* died is a lost replica too. vLLM raises ``EngineDeadError`` on every call
after its engine core crashed (a CUDA error, an out-of-memory inside a step, a tensor-parallel
fault) while the ``LLM`` object and the actor stay alive, so retrying chunks there would fail them
all at once. The engine reports :class:`~pr1_eval.engines.base.EngineDead`; the pool then kills the
actor with ``ray.kill(no_restart=False)``, which makes Ray restart it (a fresh process and engine),
and hands its chunks to the others meanwhile.

Restarts are waited for as long as a load can take: a probe (``info``) is sent with
``max_task_retries=-1``, so Ray holds it while the actor restarts and answers once the new
engine is loaded, or fails it with ``ActorDiedError`` when the actor is dead for good. The driver
never sleeps on a probe; a replica is declared dead when Ray says so or when its probe has waited
``start_timeout_s`` (then it is killed for good, so it does not come back later holding GPUs
nobody uses). An engine load that fails vLLM's start-up memory check (free GPU memory below
``gpu_memory_utilization`` × total, ``v1/worker/utils.py``; a restart on the same GPU can start
before the killed incarnation's memory is released) is retried inside the replica for up to
``load_retry_s``: Ray runs a raising constructor only once, even on a restart.

A cluster this module starts itself (``--ray auto`` with none running) is one node on the
loopback interface: nothing listens beyond 127.0.0.1 and no usage statistics are sent.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import ray
import ray.exceptions as rex

from pr1_eval.decoding.factory import DecodingSpec
from pr1_eval.engines.base import EngineDead, SamplingConfig
from pr1_eval.errors import Pr1EvalError
from pr1_eval.scaleout.loading import LOAD_RETRY_S, load_with_retry
from pr1_eval.scaleout.queue import Chunk, WorkQueue, engine_chunk_size, plan_chunks
from pr1_eval.scaleout.ray_startup import start_with_retries

MAX_RESTARTS = 2
"""Times Ray restarts a crashed replica (a killed-for-good one is not restarted)."""
START_TIMEOUT_S = 1800.0
"""How long the driver waits for a replica to (re)start, and with no live replica (a cold vLLM load
can take many minutes)."""
PROBE_RESEND_S = 2.0
"""When Ray answers a probe with ``ActorUnavailableError`` anyway, the next probe goes this much later."""
REPLICA_PREFIX = "pr1-eval-"
LOCAL_CLUSTER_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",  # a local cluster reports nothing to the outside
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # single node: bind to 127.0.0.1, probe no outside address
    "RAY_agent_register_timeout_ms": "300000",  # a busy machine starts Ray's node agent slowly
}
_LOST = (rex.RayActorError, rex.WorkerCrashedError, rex.ObjectLostError, rex.OutOfMemoryError, rex.NodeDiedError)


@dataclass(frozen=True)
class ReplicaSpec:
    """What every replica builds: the engine and the decoder of the run."""

    model: str
    engine: str
    engine_options: dict[str, Any]
    decoding: DecodingSpec = field(default_factory=DecodingSpec)
    threads: int = 1
    load_retry_s: float = LOAD_RETRY_S
    """How long a replica retries an engine load that failed vLLM's free-memory check."""


class Replica:
    """Actor body: one engine and one decoder; ``decode`` runs one chunk (calls run one at a time)."""

    def __init__(self, spec: ReplicaSpec) -> None:
        import torch

        from pr1_eval.engines.factory import make_engine

        if spec.threads > 0:
            torch.set_num_threads(spec.threads)
        utilization = float(spec.engine_options.get("gpu_memory_utilization", 0.9))
        self.engine = load_with_retry(lambda: make_engine(spec.engine, spec.model, **spec.engine_options),
                                      spec.load_retry_s, utilization if spec.engine == "vllm" else None)
        self.decoder = spec.decoding.decoder()
        self.dead: str | None = None

    def info(self) -> dict[str, Any]:
        return {"engine": self.engine.describe(), "engine_name": self.engine.name, "pid": os.getpid(),
                "node": ray.get_runtime_context().get_node_id()}

    def decode(self, contexts: list[list[int]], k: int, sampling: SamplingConfig, request_ids: list[str]) -> Any:
        """One chunk's samples; after the engine died every call raises :class:`EngineDead` at once."""
        if self.dead is not None:
            raise EngineDead(self.dead)
        try:
            return self.decoder.decode(self.engine, contexts, k, sampling, request_ids)
        except EngineDead as exc:
            self.dead = str(exc)
            raise


def start_local_cluster(num_cpus: int | None = None, num_gpus: int | None = None) -> None:
    """Start a one-node Ray cluster on the loopback interface (see the module docstring)."""
    for key, value in LOCAL_CLUSTER_ENV.items():
        os.environ.setdefault(key, value)  # read by the processes Ray starts
    import ray._private.ray_constants as constants

    constants.ENABLE_RAY_CLUSTER = False  # this process imported Ray before the variable was set
    start_with_retries(lambda: ray.init(address="local", num_cpus=num_cpus, num_gpus=num_gpus, include_dashboard=False,
                                        log_to_driver=False), ray.shutdown, "a local Ray cluster")


def connect(address: str) -> bool:
    """Join the cluster at ``address`` (``auto``: the running one, else start a local one).
    Returns whether this call connected (and so :meth:`RayPool.close` must disconnect)."""
    if ray.is_initialized():
        return False
    if address == "local":
        start_local_cluster()
        return True
    try:
        ray.init(address=address, log_to_driver=False)
    except ConnectionError as exc:
        if address != "auto":
            raise Pr1EvalError(f"--ray {address}: could not join a Ray cluster there ({exc}); start one with "
                               "`ray start --head` on the head node, or pass --ray auto") from None
        start_local_cluster()
    return True


def _last_line(exc: BaseException) -> str:
    """The message of an error raised in a replica, without Ray's traceback around it."""
    cause = getattr(exc, "cause", None)
    if cause is not None:
        return f"{type(cause).__name__}: {cause}"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1][:500] if lines else type(exc).__name__


def plan_replicas(requested: int | None, gpus_per_replica: int | None, resources: dict[str, float],
                  tensor_parallel: int = 1) -> tuple[int, int]:
    """``(replicas, gpus per replica)``: G defaults to ``--tensor-parallel-size`` (1) on a cluster
    with GPUs, 0 without; the count to the cluster's GPUs divided by G, or its CPUs for CPU replicas."""
    gpus, cpus = int(resources.get("GPU", 0)), int(resources.get("CPU", 1))
    per = gpus_per_replica if gpus_per_replica is not None else (tensor_parallel if gpus > 0 else 0)
    if per < 0:
        raise Pr1EvalError(f"--gpus-per-replica must be 0 or more, got {per}")
    if tensor_parallel > 1 and per != tensor_parallel:
        raise Pr1EvalError(f"--tensor-parallel-size {tensor_parallel} and --gpus-per-replica {per} disagree: with --ray "
                           "a replica's tensor parallelism is its GPU count; pass only --gpus-per-replica")
    if per > 0 and gpus == 0:
        raise Pr1EvalError(f"--gpus-per-replica {per}: the Ray cluster has no GPUs; pass --gpus-per-replica 0 "
                           "to run replicas on CPUs")
    count = requested if requested is not None else max(1, gpus // per if per else cpus)
    if count < 1:
        raise Pr1EvalError(f"--replicas must be at least 1, got {count}")
    if per and count * per > gpus:
        print(f"warning: {count} replicas × {per} GPU(s) exceed the cluster's {gpus} GPU(s); "
              "the extra replicas start only if GPUs are added", file=sys.stderr)
    return count, per


def replica_spec_for(spec: ReplicaSpec, gpus_per_replica: int) -> ReplicaSpec:
    """A vLLM replica uses all its GPUs as tensor parallelism; an HF replica drives one device."""
    if spec.engine == "hf":
        if gpus_per_replica > 1:
            raise Pr1EvalError(f"--gpus-per-replica {gpus_per_replica}: an HF replica uses one GPU; pass 1 (or --engine vllm)")
        return spec
    if gpus_per_replica <= 1:
        return spec
    return replace(spec, engine_options={**spec.engine_options, "tensor_parallel_size": gpus_per_replica})


@dataclass
class PoolStats:
    """What happened during the run, for ``run.json`` and the summary note."""

    replicas: int
    gpus_per_replica: int
    chunks: int = 0
    retried_chunks: int = 0
    replicas_lost: int = 0
    replicas_restarted: int = 0
    chunk_errors: int = 0
    engine_deaths: int = 0
    """Losses that were a dead engine in a live process (the pool killed the replica to restart it)."""
    replicas_given_up: int = 0
    """Replicas that did not come back within the start timeout (killed for good)."""
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"backend": "ray", "replicas": self.replicas, "gpus_per_replica": self.gpus_per_replica,
                "chunks": self.chunks, "retried_chunks": self.retried_chunks, "replicas_lost": self.replicas_lost,
                "replicas_restarted": self.replicas_restarted, "chunk_errors": self.chunk_errors,
                "engine_deaths": self.engine_deaths, "replicas_given_up": self.replicas_given_up,
                "errors": self.errors[:10]}


class RayPool:
    """Replica actors and the driver loop that feeds them (see the module docstring)."""

    def __init__(self, spec: ReplicaSpec, address: str, replicas: int | None = None, gpus_per_replica: int | None = None,
                 *, start_timeout_s: float = START_TIMEOUT_S, runtime_env: dict[str, Any] | None = None,
                 replica_class: type = Replica, probe_resend_s: float = PROBE_RESEND_S) -> None:
        """``replica_class`` (an actor body with :class:`Replica`'s methods) and the timeouts are
        injectable so that tests can stand in a replica and compress time."""
        self._owns_connection = connect(address)
        try:
            tensor_parallel = int(spec.engine_options.get("tensor_parallel_size", 1))
            count, per = plan_replicas(replicas, gpus_per_replica, ray.cluster_resources(), tensor_parallel)
            spec = replica_spec_for(spec, per)
        except BaseException:
            self._disconnect()
            raise
        self.spec = spec
        self.stats = PoolStats(count, per)
        self.start_timeout_s = start_timeout_s
        self.probe_resend_s = probe_resend_s
        self.on_change: Callable[[int, int], None] | None = None
        self._tokenizer: Any = None
        self.infos: dict[int, dict[str, Any]] = {}
        options: dict[str, Any] = {"num_cpus": max(1, spec.threads), "num_gpus": per, "max_restarts": MAX_RESTARTS,
                                   "max_task_retries": 0}
        if runtime_env:
            options["runtime_env"] = runtime_env
        token = uuid.uuid4().hex[:6]
        actor_class: Any = ray.remote(replica_class)
        self.actors: list[Any] = [actor_class.options(name=f"{REPLICA_PREFIX}{token}-replica-{i}", **options).remote(spec)
                                  for i in range(count)]
        self.states = ["starting"] * count
        self._probes: dict[Any, tuple[int, float]] = {}
        """Probe in flight → (replica, when its wait began): the start timeout runs from then."""
        self._resend: dict[int, tuple[float, float]] = {}
        """Replica → (when to probe again, when its wait began), after an ``ActorUnavailableError``."""
        self.probes_sent = [0] * count
        self._killed_pid: dict[int, Any] = {}
        """Replica → the pid the pool killed to restart it: an answer from that pid is the old incarnation's."""
        """Probes per replica: one per (re)start when Ray holds them through the restart, as it should."""
        now = time.monotonic()
        for index in range(count):
            self._probe(index, now)

    @classmethod
    def start(cls, spec: ReplicaSpec, address: str, replicas: int | None = None,
              gpus_per_replica: int | None = None) -> RayPool:
        """Start the replicas and return once one of them has loaded its engine."""
        pool = cls(spec, address, replicas, gpus_per_replica)
        try:
            pool.wait_ready()
        except BaseException:
            pool.close()
            raise
        return pool

    # ------------------------------------------------------------------ the runner's view
    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer, loaded here: the driver builds prompts and records."""
        if self._tokenizer is None:
            from pr1_eval.engines.hf import load_tokenizer

            self._tokenizer = load_tokenizer(self.spec.model)
        return self._tokenizer

    @property
    def waiting_limit(self) -> int:
        """Chunks that may wait for the grader before the driver stops handing out work."""
        return max(8, 4 * len(self.actors))

    def plan(self, todo: dict[str, list[tuple[int, list[int]]]], requested: int | None) -> list[Chunk]:
        """Chunks of ``--problems-per-chunk``, else of guided sizes up to the engine's default
        (:func:`~pr1_eval.scaleout.queue.guided_sizes`: big first, single problems at the end)."""
        if requested:
            return plan_chunks(todo, requested)
        return plan_chunks(todo, engine_chunk_size(self.engine_name), replicas=len(self.actors))

    def watch(self, bar: Any) -> None:
        """Show the live replicas beside the progress bar."""
        self.on_change = lambda live, total: bar.set_postfix_str(f"replicas {live}/{total} live")
        self._notify()

    def summary(self) -> dict[str, Any]:
        return {"scaleout": self.stats.to_dict()}

    # ------------------------------------------------------------------ state
    @property
    def live(self) -> int:
        return self.states.count("live")

    def _notify(self) -> None:
        if self.on_change is not None:
            self.on_change(self.live, len(self.actors))

    def wait_ready(self, count: int = 1) -> dict[str, Any]:
        """Block until ``count`` replicas have loaded their engine; returns the first one's ``info()``."""
        deadline = time.monotonic() + self.start_timeout_s
        while self.live < count:
            self._tend_probes()
            if not self._probes and not self._resend:
                raise Pr1EvalError("no Ray replica could start: " + "; ".join(dict.fromkeys(self.stats.errors)))
            if time.monotonic() > deadline:
                raise Pr1EvalError(f"no Ray replica started within {self.start_timeout_s:.0f} s; check the cluster's "
                                   "free GPUs (`ray status`) and the model path on the worker nodes")
            for ref in self._wait(list(self._probes)):
                self._on_probe(ref)
        return next(iter(self.infos.values()))

    def describe(self) -> dict[str, Any]:
        """The first ready replica's engine description plus the pool's shape."""
        first = next(iter(self.infos.values()))
        return {**first["engine"], "replicas": len(self.actors), "gpus_per_replica": self.stats.gpus_per_replica,
                "scaleout": "ray"}

    @property
    def engine_name(self) -> str:
        return str(next(iter(self.infos.values()))["engine_name"])

    # ------------------------------------------------------------------ probes
    def _probe(self, index: int, since: float) -> None:
        """Ask replica ``index`` for its ``info``; Ray holds the call while the actor restarts."""
        self.probes_sent[index] += 1
        self._probes[self.actors[index].info.options(max_task_retries=-1).remote()] = (index, since)

    def _wait(self, refs: list[Any]) -> list[Any]:
        """The refs among ``refs`` that are ready, waiting at most until the next probe is due."""
        timeout = 5.0
        if self._resend:
            timeout = max(0.0, min(timeout, min(at for at, _ in self._resend.values()) - time.monotonic()))
        if not refs:
            time.sleep(timeout)  # nothing in flight at all: there is nothing else to do
            return []
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        return list(ready)

    def _tend_probes(self) -> None:
        """Send the probes that are due, and give up on replicas that waited longer than the start timeout."""
        now = time.monotonic()
        for index, (at, since) in list(self._resend.items()):
            if at <= now:
                del self._resend[index]
                self._probe(index, since)
        for ref, (index, since) in list(self._probes.items()):
            if now - since > self.start_timeout_s:
                del self._probes[ref]
                self._give_up(index, f"not back within {self.start_timeout_s:.0f} s")
        for index, (_, since) in list(self._resend.items()):
            if now - since > self.start_timeout_s:
                del self._resend[index]
                self._give_up(index, f"not back within {self.start_timeout_s:.0f} s")

    def _give_up(self, index: int, reason: str) -> None:
        """Declare a replica dead and kill it for good: a restart that finishes later must not hold GPUs idle."""
        self.states[index] = "dead"
        self.stats.replicas_given_up += 1
        self.stats.errors.append(f"replica {index}: {reason}")
        with contextlib.suppress(Exception):
            ray.kill(self.actors[index], no_restart=True)
        self._notify()

    def _on_probe(self, ref: Any) -> None:
        index, since = self._probes.pop(ref)
        try:
            info = ray.get(ref)
        except rex.ActorUnavailableError:  # not restarted yet, retries notwithstanding: ask again later
            self._resend[index] = (time.monotonic() + self.probe_resend_s, since)
            return
        except (rex.RayError, Pr1EvalError) as exc:  # Ray says it is dead (or its engine could not load)
            self.states[index] = "dead"
            self.stats.errors.append(f"replica {index}: {_last_line(exc)}")
        else:
            if index in self._killed_pid and info.get("pid") == self._killed_pid[index]:
                # answered by the incarnation being killed (the kill is asynchronous): ask the new one
                self._resend[index] = (time.monotonic() + min(self.probe_resend_s, 0.5), since)
                return
            self._killed_pid.pop(index, None)
            if self.states[index] == "restarting":
                self.stats.replicas_restarted += 1
            self.states[index] = "live"
            self.infos[index] = info
        self._notify()

    # ------------------------------------------------------------------ driving
    def results(self, chunks: Sequence[Chunk], payload: Callable[[Chunk], tuple[list[list[int]], list[str]]], k: int,
                sampling: SamplingConfig) -> Iterator[tuple[Chunk, Any]]:
        """Decoded samples of every chunk, in completion order, each exactly once."""
        queue = WorkQueue(chunks)
        self.stats.chunks = len(chunks)
        inflight: dict[Any, tuple[int, Chunk]] = {}
        no_live_since: float | None = None
        while not queue.finished:
            self._tend_probes()
            self._fill(queue, inflight, payload, k, sampling)
            if not inflight and not self._probes and not self._resend:
                raise Pr1EvalError("every Ray replica was lost (" + "; ".join(self.stats.errors[-3:]) + "); finished "
                                   "chunks are saved — rerun the same command to resume")
            if self.live == 0:
                no_live_since = no_live_since or time.monotonic()
                if time.monotonic() - no_live_since > self.start_timeout_s:
                    raise Pr1EvalError(f"no Ray replica has been live for {self.start_timeout_s:.0f} s; finished "
                                       "chunks are saved — rerun the same command to resume")
            else:
                no_live_since = None
            for ref in self._wait([*inflight, *self._probes]):
                if ref in self._probes:
                    self._on_probe(ref)
                    continue
                if ref not in inflight:  # dropped with its lost replica
                    continue
                index, chunk = inflight.pop(ref)
                decoded = self._collect(ref, index, chunk, queue, inflight)
                if decoded is not None and queue.complete(chunk.id, index):
                    self._fill(queue, inflight, payload, k, sampling)
                    yield chunk, decoded
        self.stats.retried_chunks = len(queue.retried)

    def _collect(self, ref: Any, index: int, chunk: Chunk, queue: WorkQueue, inflight: dict[Any, tuple[int, Chunk]]) -> Any:
        """The chunk's samples, or None after handling a lost replica or a failed call."""
        try:
            return ray.get(ref)
        except _LOST as exc:
            self._lost(index, _last_line(exc), queue, inflight)
        except rex.RayTaskError as exc:
            if isinstance(exc.cause, Pr1EvalError):
                raise Pr1EvalError(str(exc.cause)) from None
            if isinstance(exc.cause, EngineDead):
                self._replace(index, _last_line(exc), queue, inflight)
                return None
            self.stats.chunk_errors += 1
            self.stats.errors.append(f"replica {index}: {_last_line(exc)}")
            queue.requeue(chunk.id, _last_line(exc))
        self.stats.retried_chunks = len(queue.retried)
        return None

    def _replace(self, index: int, reason: str, queue: WorkQueue, inflight: dict[Any, tuple[int, Chunk]]) -> None:
        """A replica whose engine died: kill its process so that Ray restarts it, and treat it as lost."""
        self.stats.engine_deaths += 1
        self._killed_pid[index] = self.infos.get(index, {}).get("pid")
        with contextlib.suppress(Exception):  # already gone
            ray.kill(self.actors[index], no_restart=False)
        self._lost(index, f"engine dead, restarting the replica ({reason})", queue, inflight)

    def _lost(self, index: int, reason: str, queue: WorkQueue, inflight: dict[Any, tuple[int, Chunk]]) -> None:
        """Requeue a dead replica's chunks, forget its other calls, and probe it (Ray may restart it)."""
        self.stats.replicas_lost += 1
        self.stats.errors.append(f"replica {index} lost: {reason}")
        self.states[index] = "restarting"
        for ref in [r for r, (i, _) in inflight.items() if i == index]:
            del inflight[ref]
        queue.release(index, reason)
        self._probe(index, time.monotonic())
        self._notify()

    def _fill(self, queue: WorkQueue, inflight: dict[Any, tuple[int, Chunk]],
              payload: Callable[[Chunk], tuple[list[list[int]], list[str]]], k: int, sampling: SamplingConfig) -> None:
        """Give every live replica one chunk, then a second one while more chunks wait than replicas are live."""
        live = [i for i, state in enumerate(self.states) if state == "live"]
        for depth in (1, 2):
            for index in live:
                if depth == 2 and queue.pending <= len(live):
                    return
                if queue.held(index) >= depth:
                    continue
                chunk = queue.take(index)
                if chunk is None:
                    return
                contexts, request_ids = payload(chunk)
                inflight[self.actors[index].decode.remote(contexts, k, sampling, request_ids)] = (index, chunk)

    def close(self) -> None:
        """Stop every replica, and disconnect if this pool connected."""
        for actor in self.actors:
            with contextlib.suppress(Exception):  # already dead
                ray.kill(actor)
        self._disconnect()

    def _disconnect(self) -> None:
        if self._owns_connection and ray.is_initialized():
            ray.shutdown()
        self._owns_connection = False
