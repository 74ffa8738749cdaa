"""Synthetic rollouts for repro's rollout writer (:mod:`repro.rollouts`), every field known.

Shared by the writer's store tests, its journal tests (which also import this module in a child
process they kill) and its config tests: a step is ``prompts`` × :data:`N` rollouts, session ``s``
of prompt ``p`` earns reward ``s`` and opens a block when ``s`` is odd.
"""

from __future__ import annotations

from pathlib import Path

from pr1_eval.records.sample import SampleRecord
from pr1_eval.store.run_store import RunStore
from repro.rollouts.records import Rollout
from repro.rollouts.runs import RolloutRunsOptions

N = 4  # rollouts per prompt


def options(root: Path, prompts: int = 3, every: int = 1, chunk: int = 5) -> RolloutRunsOptions:
    return RolloutRunsOptions(root=root, job="job", train_rows=prompts * N, train_n=N, val_rows=6, val_n=3,
                              every=every, chunk=chunk, max_wait_s=60.0, response_budget=100)


def rollout(step: int, prompt: int, session: int, kind: str = "train", uid: str | None = None,
            reward: float = 1.0) -> Rollout:
    text = f"step {step} p{prompt} s{session} " + ("<Parallel><Path>a</Path><Path>b</Path></Parallel>"
                                                     "<Summary>s</Summary>" if session % 2 else "") + "Final Answer: 1"
    record = SampleRecord(task="dapo", problem_id=f"p{prompt}", sample_idx=0, response=text, reward=reward,
                          correct=session % 2 == 1, n_response_tokens=10 + session, finish_reason="stop",
                          has_parallel=session % 2 == 1, n_blocks=session % 2, block_rel_starts=[0.5] * (session % 2))
    return Rollout(kind, step, uid or f"s{step}-u{prompt}", session, record)


def step_rows(step: int, prompts: int = 3) -> list[Rollout]:
    return [rollout(step, p, s, reward=float(s)) for p in range(prompts) for s in range(N)]


def keys(run: Path) -> list[tuple[str, str, int]]:
    return sorted((r.task, r.problem_id, r.sample_idx) for r in RunStore(run).read_records())
