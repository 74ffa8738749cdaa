"""An adaptive run's rounds: draw ``round_size`` samples of every unsettled problem, grade and store
them, look, and go on (``pr1-eval run --adaptive``; the rule is :mod:`pr1_eval.stats.sequential`).

Why rounds and not one look per sample: an engine is fast on many requests at once, so a round
gives every open problem a few samples in one batch; the rule's guarantee holds for any number of
looks, so the round size only trades batching against samples drawn past the point of settling.

Resuming needs no state of its own: each round's work is read from the store. A problem is open in
round t when the rule, replayed on its stored verdicts of rounds before t, has not settled it; its
missing samples of round t are drawn. So a rerun of a killed run redoes exactly the samples the
uninterrupted run would have drawn, with the same request ids (each round's ids end in
``#round<t>``, so every round draws new samples; an adaptive sample is therefore not the fixed-k
run's sample of the same index).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pr1_eval.report.task_arrays import verdicts
from pr1_eval.scaleout.queue import Chunk
from pr1_eval.stats.sequential import StopRule, required_samples, settled
from pr1_eval.store.run_store import RunStore


@dataclass(frozen=True)
class Draw:
    """Which samples one pass of the runner draws per problem: indices ``offset`` to
    ``offset + count`` (a fixed-k run: 0 to k in one pass; an adaptive run: one round), with
    ``suffix`` added to every request id."""

    count: int
    offset: int = 0
    suffix: str = ""


Held = dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]
"""(task, problem id) → its stored sample indices (sorted) and their verdicts in that order."""


def held_verdicts(store: RunStore) -> Held:
    """Every stored sample's verdict, by problem, in sample order (could not score: wrong)."""
    if not store.exists():
        return {}
    frame = store.read_table(columns=["task", "problem_id", "sample_idx", "correct"]).to_pandas()
    frame = frame.sort_values(["task", "problem_id", "sample_idx"], kind="stable")
    out: Held = {}
    for (task, pid), group in frame.groupby(["task", "problem_id"], sort=False):
        out[(str(task), str(pid))] = (group["sample_idx"].to_numpy(dtype=int), verdicts(group["correct"]))
    return out


def open_problems(tasks: Mapping[str, Any], held: Held, rule: StopRule, start: int,
                  end: int) -> dict[str, list[tuple[int, list[int]]]]:
    """Per task, (problem index, missing sample indices in ``start``..``end``) of every problem the
    rule has not settled on its samples before ``start``."""
    todo: dict[str, list[tuple[int, list[int]]]] = {}
    for name, task in tasks.items():
        items = []
        for i, problem in enumerate(task.loaded.problems):
            indices, correct = held.get((problem.task, problem.problem_id), (np.zeros(0, int), np.zeros(0, bool)))
            if start and required_samples(correct[indices < start], rule) <= start:
                continue
            have = set(indices.tolist())
            missing = [s for s in range(start, end) if s not in have]
            if missing:
                items.append((i, missing))
        todo[name] = items
    return todo


def adaptive_rounds(config: Any, rule: StopRule, source: Any, tasks: Mapping[str, Any], store: RunStore,
                    generate: Callable[[Sequence[Chunk], Draw], None]) -> dict[str, Any]:
    """Draw every round (``generate`` makes, grades and stores a round's chunks), then return
    run.json's ``adaptive`` section: the rule, the samples each problem drew and the side each
    settled problem was settled on."""
    bounds = rule.boundaries()
    total = sum(len(task.loaded.problems) for task in tasks.values())
    found = held_verdicts(store)
    if (resumed := adaptive_resume_line(store.root, found, rule, total)) is not None:
        print(resumed, file=sys.stderr, flush=True)
    for t, end in enumerate(bounds):
        start = bounds[t - 1] if t else 0
        todo = open_problems(tasks, held_verdicts(store), rule, start, end)
        if any(todo.values()):
            print(round_line(t, len(bounds), todo, total, end - start), file=sys.stderr, flush=True)
            generate(source.plan(todo, config.problems_per_chunk), Draw(end - start, start, f"#round{t}"))
    return {**rule.to_dict(), **drawn_and_settled(held_verdicts(store), rule)}


def round_line(t: int, rounds: int, todo: Mapping[str, list[tuple[int, list[int]]]], total: int, size: int) -> str:
    """``round 2 of ≤ 4: 8 of 30 problems open, 32 samples to draw``: which round, and how much is left.
    Why "≤": later rounds happen only for problems still open, so the run may end before the last."""
    open_now = sum(len(items) for items in todo.values())
    samples = sum(len(missing) for items in todo.values() for _, missing in items)
    return (f"round {t + 1} of ≤ {rounds}: {open_now} of {total} problem(s) open, {samples} sample(s) to draw "
            f"({size} per problem)")


def adaptive_resume_line(out: Path, held: Held, rule: StopRule, total: int) -> str | None:
    """``resuming runs/x: 96 samples already held over 30 problems (12 settled); the rounds go on from
    there`` when the folder already holds samples of this adaptive run; None for a fresh one (the
    fixed-k runner's resume line, :func:`pr1_eval.generate.runner.resume_line`, for the same reason)."""
    if not held:
        return None
    samples = sum(len(correct) for _, correct in held.values())
    done = sum(1 for _, correct in held.values() if len(correct) >= required_samples(correct, rule))
    return (f"resuming {out}: {samples} sample(s) already held over {len(held)} of {total} problem(s) "
            f"({done} finished: settled or at k = {rule.max_k}); the rounds go on from there")


def drawn_and_settled(held: Held, rule: StopRule) -> dict[str, Any]:
    """``samples_drawn`` (task → problem → n) and ``settled`` (task → problem → -1 | +1)."""
    drawn: dict[str, dict[str, int]] = {}
    sides: dict[str, dict[str, int]] = {}
    for (task, pid), (_, correct) in held.items():
        drawn.setdefault(task, {})[pid] = len(correct)
        need = required_samples(correct, rule)
        side = int(settled(int(correct[:need].sum()), need, rule)) if len(correct) >= need else 0
        if side:
            sides.setdefault(task, {})[pid] = side
    return {"samples_drawn": drawn, "settled": sides}
