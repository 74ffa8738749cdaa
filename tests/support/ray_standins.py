"""Stand-in Ray replicas for the pool's failure tests: no engine, scripted deaths and slow restarts.

Imported by the Ray workers (the test puts this folder on their PYTHONPATH). A stand-in keeps its
state in files under ``spec.model`` (a folder): ``plan.json`` says, per replica index, at which
decode call of its first incarnation it SIGKILLs itself and how long a restart (its constructor
after the first) takes; ``incarnations-<i>`` counts constructions.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import ray


class ScriptedReplica:
    """Has :class:`pr1_eval.scaleout.ray_pool.Replica`'s methods; ``decode`` returns who ran it."""

    def __init__(self, spec: Any) -> None:
        self.folder = Path(spec.model)
        name = ray.get_runtime_context().get_actor_name() or "replica-0"
        self.index = int(name.rsplit("-", 1)[-1])
        plan = json.loads((self.folder / "plan.json").read_text()).get(str(self.index), {})
        counter = self.folder / f"incarnations-{self.index}"
        with counter.open("a") as fh:
            fh.write("x")
        self.incarnation = len(counter.read_text())
        self.die_at = int(plan.get("die_at_call", 0)) if self.incarnation == 1 else 0
        self.chunk_s = float(plan.get("chunk_s", 0.2))
        self.calls = 0
        if self.incarnation > 1:
            time.sleep(float(plan.get("restart_s", 0)))  # a slow engine load on the restart

    def info(self) -> dict[str, Any]:
        return {"engine": {"backend": "stand-in"}, "engine_name": "stand-in", "pid": os.getpid(), "node": "local"}

    def decode(self, contexts: list[list[int]], k: int, sampling: Any, request_ids: list[str]) -> Any:
        self.calls += 1
        if self.calls == self.die_at:
            os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer would
        time.sleep(self.chunk_s)
        return [[(self.index, self.incarnation, time.monotonic())] * k for _ in contexts]
