"""Data parallelism for the vLLM engine: one ``vllm.LLM`` replica per GPU group, in worker processes.

vLLM refuses ``LLM(data_parallel_size>1)`` in a single process ("not supported for single-process
usage and may hang") and points to a multi-process launcher. A dense model needs no coordination
between replicas, so each worker is an independent ``LLM`` with ``tensor_parallel_size`` GPUs of
its own (``CUDA_VISIBLE_DEVICES`` set before vLLM is imported), fed over a pipe.

Routing: requests whose ids share the text before the first ``#`` (in pr1-eval's decoders: every
request of one problem's samples, across fork-join waves) prefer the same replica, so its prefix
cache holds their prompt; within that preference, groups are spread longest-first onto the least
loaded replica (load = samples × token budget), so a few long problems do not pile onto one GPU.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
from collections.abc import Sequence
from typing import Any

from pr1_eval.errors import Pr1EvalError

START_TIMEOUT_S = 1800.0
"""Model load on a cold node (weights from network storage, CUDA graphs) can take many minutes."""


def _worker(conn: Any, gpus: str | None, llm_kwargs: dict[str, Any]) -> None:
    """Worker process body: load one replica, then answer ``(prompts, params)`` until ``None``."""
    if gpus is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus
    try:
        from pr1_eval.engines.vllm_engine import import_vllm, run_llm

        vllm = import_vllm()
        llm = vllm.LLM(**llm_kwargs)
        conn.send(("ready", None))
    except BaseException as exc:  # report, never hang the parent
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    while True:
        message = conn.recv()
        if message is None:
            return
        try:
            conn.send(("ok", run_llm(llm, vllm, *message)))
        except BaseException as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


def gpu_groups(data_parallel_size: int, tensor_parallel_size: int, visible: str | None) -> list[str | None]:
    """Disjoint ``CUDA_VISIBLE_DEVICES`` values, one per replica, taken from ``visible`` (or 0..N-1).

    ``None`` entries (when nothing is known about GPUs, e.g. under a fake vllm in tests) leave the
    environment as it is.
    """
    if visible is None:
        try:
            import torch

            count = torch.cuda.device_count()
        except Exception:
            count = 0
        if count == 0:
            return [None] * data_parallel_size
        devices = [str(i) for i in range(count)]
    else:
        devices = [d.strip() for d in visible.split(",") if d.strip()]
    need = data_parallel_size * tensor_parallel_size
    if len(devices) < need:
        raise Pr1EvalError(
            f"data parallel {data_parallel_size} × tensor parallel {tensor_parallel_size} needs {need} GPUs, "
            f"but {len(devices)} are visible ({','.join(devices) or 'none'})"
        )
    return [",".join(devices[r * tensor_parallel_size : (r + 1) * tensor_parallel_size]) for r in range(data_parallel_size)]


def assign(keys: Sequence[str], costs: Sequence[int], replicas: int, sticky: dict[str, int]) -> list[int]:
    """Replica for each request: same key → same replica, keys spread longest-first by load.

    A key keeps the replica it had before (``sticky``, updated in place) unless that replica is
    already loaded by more than the key's own cost above the least loaded one.
    """
    totals: dict[str, int] = {}
    for key, cost in zip(keys, costs, strict=True):
        totals[key] = totals.get(key, 0) + cost
    load = [0] * replicas
    chosen: dict[str, int] = {}
    for key in sorted(totals, key=lambda k: (-totals[k], k)):
        least = min(range(replicas), key=lambda r: (load[r], r))
        previous = sticky.get(key)
        pick = previous if previous is not None and load[previous] <= load[least] + totals[key] else least
        chosen[key] = pick
        load[pick] += totals[key]
    sticky.update(chosen)
    return [chosen[key] for key in keys]


class ReplicaPool:
    """Worker processes, one ``vllm.LLM`` each; :meth:`generate` fans a call out and gathers it."""

    def __init__(self, processes: list[Any], connections: list[Any]) -> None:
        self._processes = processes
        self._connections = connections
        self._sticky: dict[str, int] = {}

    @classmethod
    def start(cls, data_parallel_size: int, tensor_parallel_size: int, llm_kwargs: dict[str, Any]) -> ReplicaPool:
        """Spawn the workers (spawn, not fork: CUDA cannot be forked) and wait until all loaded."""
        groups = gpu_groups(data_parallel_size, tensor_parallel_size, os.environ.get("CUDA_VISIBLE_DEVICES"))
        context = mp.get_context("spawn")
        processes, connections = [], []
        for gpus in groups:
            parent, child = context.Pipe()
            process = context.Process(target=_worker, args=(child, gpus, llm_kwargs), daemon=True)
            process.start()
            child.close()
            processes.append(process)
            connections.append(parent)
        pool = cls(processes, connections)
        for rank, conn in enumerate(connections):
            status, detail = pool._receive(conn, rank, START_TIMEOUT_S)
            if status != "ready":
                pool.close()
                raise Pr1EvalError(f"vLLM data-parallel replica {rank} failed to start: {detail}")
        return pool

    def _receive(self, conn: Any, rank: int, timeout_s: float | None) -> tuple[str, Any]:
        if timeout_s is not None and not conn.poll(timeout_s):
            return "error", f"no answer within {timeout_s:.0f} s"
        try:
            return conn.recv()  # type: ignore[no-any-return]
        except EOFError:
            return "error", f"replica {rank} exited (exit code {self._processes[rank].exitcode})"

    @property
    def size(self) -> int:
        return len(self._connections)

    def generate(self, request_ids: Sequence[str], prompts: Sequence[list[int]], params: Sequence[dict[str, Any]]) -> list[Any]:
        """Route each request to a replica, run all replicas at once, return outputs in order."""
        costs = [int(p.get("n", 1)) * int(p.get("max_tokens", 1)) for p in params]
        replica_of = assign([rid.split("#", 1)[0] for rid in request_ids], costs, self.size, self._sticky)
        members: list[list[int]] = [[] for _ in range(self.size)]
        for index, replica in enumerate(replica_of):
            members[replica].append(index)
        for replica, idx in enumerate(members):
            if idx:
                self._connections[replica].send(([prompts[i] for i in idx], [params[i] for i in idx]))
        out: list[Any] = [None] * len(prompts)
        errors = []
        for replica, idx in enumerate(members):
            if not idx:
                continue
            status, payload = self._receive(self._connections[replica], replica, None)
            if status != "ok":
                errors.append(f"replica {replica}: {payload}")
                continue
            for i, result in zip(idx, payload, strict=True):
                out[i] = result
        if errors:
            raise Pr1EvalError("vLLM generation failed on " + "; ".join(errors))
        return out

    def close(self) -> None:
        """Ask every worker to exit, then make sure it has."""
        for conn in self._connections:
            with contextlib.suppress(OSError):  # a worker that already died
                conn.send(None)
        for process in self._processes:
            process.join(timeout=30)
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
        for conn in self._connections:
            conn.close()
        self._connections, self._processes = [], []
