"""Same commit, same figures: one stage trained twice must log the same numbers at every step.

Why a check and not a hope: a CI verdict that changes between two runs of one commit blocks
unrelated work (the nano reward check used to fail one run in four). What makes the figures repeat
is spelled out where it is done: each rollout request seeded from ``rollout.seed``, the step and its
place in the batch (``repro.testing.cpu_rollout``), the fork-join loop's request ids
(``repro.agent_loop``), torch on a fixed thread count in every process and one hash seed
(``repro.testing.verl_cpu``), the prompt order seeded (``repro.nano.plan.DETERMINISM``). Batches are
assembled in batch order by VERL itself (``asyncio.gather`` keeps argument order), whatever order
Ray delivers the results in. :func:`same_twice` compares two runs of one stage; ``bench/bench_nano.py
--repeat STAGE`` (CI runs it) trains the stage a second time from the same start.
"""

from __future__ import annotations

import json
from pathlib import Path

from repro.nano.checks import Check
from repro.nano.provenance import same_start
from repro.nano.stored import stored_steps

COMPARED = ("critic/score/mean", "actor/pg_loss", "rollout_corr/kl", "response_length/mean", "train/loss")
"""VERL's per-step figures that must repeat: mean reward, policy-gradient loss, rollout/actor KL,
response length (RL); the loss (SFT). Timings and memory are left out: they are the machine's."""
TOLERANCE = 1e-6


def _differences(first: dict[int, dict[str, float]], second: dict[int, dict[str, float]]) -> list[str]:
    out = []
    if sorted(first) != sorted(second):
        out.append(f"steps {sorted(first)} vs {sorted(second)}")
    for step in sorted(set(first) & set(second)):
        for key in COMPARED:
            a, b = first[step].get(key), second[step].get(key)
            if a is None and b is None:
                continue
            if a is None or b is None or abs(a - b) > TOLERANCE:
                out.append(f"step {step} {key}: {a} vs {b}")
    return out


def same_twice(stage: str, first: dict[int, dict[str, float]], second: dict[int, dict[str, float]],
               first_rewards: dict[int, list[float]] | None = None,
               second_rewards: dict[int, list[float]] | None = None) -> Check:
    """Every step's :data:`COMPARED` figures within :data:`TOLERANCE`, and (RL) every stored rollout's
    reward equal, row by row in (problem, sample) order."""
    problems = _differences(first, second)
    if first_rewards is not None or second_rewards is not None:
        a, b = first_rewards or {}, second_rewards or {}
        for step in sorted(set(a) | set(b)):
            if a.get(step) != b.get(step):
                problems.append(f"step {step}: stored rewards differ")
    keys = sorted({k for m in first.values() for k in m if k in COMPARED})
    if problems:
        figures = "; ".join(problems[:6]) + (f" … ({len(problems)} differences)" if len(problems) > 6 else "")
    else:
        rewards = "" if first_rewards is None else f", and all {sum(map(len, first_rewards.values()))} stored rewards"
        figures = f"{len(first)} steps × {', '.join(keys)} equal{rewards}"
    return Check(stage, "same figures twice", not problems, figures,
                 f"a second run of the stage from the same start: every step's {', '.join(keys) or 'figures'} "
                 f"within {TOLERANCE:g}, rollout rewards equal")


def compare_jobs(first: Path, second: Path) -> list[Check]:
    """:func:`same_twice` for every stage two finished nano jobs (``OUT`` folders) share, from their
    ``nano.json`` and stored rollout runs: how two runs of one commit are shown to agree. First, whether
    they started from the same weights (:func:`repro.nano.provenance.same_start`): on another machine
    the tiny models differ and the figures are a new draw."""
    docs = [json.loads((out / "nano.json").read_text(encoding="utf-8")) for out in (first, second)]
    stages = [{s["name"]: s for s in doc["stages"]} for doc in docs]
    found = [same_start(docs[0], docs[1])]
    for name in [n for n in stages[0] if n in stages[1]]:
        metrics = [{int(k): v for k, v in st[name]["metrics"].items()} for st in stages]
        rewards = None
        if stages[0][name]["kind"] == "ppo":
            rewards = [{s: run["rewards"] for s, run in stored_steps(out / name / "rollout_runs" / "train").items()}
                       for out in (first, second)]
        found.append(same_twice(name, metrics[0], metrics[1], *(rewards or (None, None))))
    return found
