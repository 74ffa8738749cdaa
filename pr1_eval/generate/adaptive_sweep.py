"""``pr1-eval sweep --adaptive --decide best|ranking``: sample checkpoints in rounds until the comparison is decided.

Why rounds over checkpoints: the noise of a sweep's verdict lives in the comparison, not in any
one checkpoint, so the stopping rule must see every checkpoint's samples side by side. A sweep loads
one model at a time, so a round is: for each checkpoint still open, load it, draw the round's samples
of *every* problem (so each pair is compared on the same problems with the same counts), free it.
After each round the rule (:func:`pr1_eval.stats.ranking_verdicts.decide`) says which checkpoints
are still needed; the sweep stops once the question is answered or every open checkpoint holds
``k_max`` samples per problem. Rounds grow geometrically (``--first-round``, ``--round-growth``)
so each model is loaded a few times, not once per sample (from 4 to 64 doubling: 5 loads at most).

Each checkpoint's run is an ordinary run folder (``…-k<k_max>-seed<seed>-decide``) whose ``k`` is
raised round by round to the samples it holds, so ``report`` and ``leaderboard`` read it as a
complete fixed-k run at the k it reached; ``run.json`` keeps the rule under ``adaptive_sweep``. A
round's samples are indices [start, end) drawn with request ids ending ``#round<t>`` (new samples
each round, as in :mod:`pr1_eval.generate.adaptive`). Nothing else keeps state: the rule is replayed
from the stored verdicts, so a killed sweep rerun with the same command redoes only the samples that
were lost and reaches the same decisions. The sweep's record (settings, arrival order, verdicts) is
``<out-root>/<family>-adaptive-sweep.json``; a rerun that finds new checkpoints appends them in
arrival order (they take the α reserve: :func:`pr1_eval.stats.ranking_sequential.pair_weights`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pr1_eval.engines.factory import make_engine
from pr1_eval.errors import Pr1EvalError
from pr1_eval.generate.adaptive import Draw, held_verdicts
from pr1_eval.generate.plan import RunPlan, derive_plan
from pr1_eval.generate.preflight import check_output
from pr1_eval.generate.runner import LocalChunks, _generate_all, render_prompts
from pr1_eval.generate.sweep import Sweep, SweepRow, _record_family, _release
from pr1_eval.grading.annotate import position_unit
from pr1_eval.inputs import checkpoints as ckpts
from pr1_eval.inputs.checkpoints import Checkpoint
from pr1_eval.records.provenance import now_iso
from pr1_eval.stats.ranking_verdicts import DecideSettings, Decision, decide
from pr1_eval.store.run_lock import run_lock
from pr1_eval.store.run_store import RunStore

SECTION = "adaptive_sweep"


@dataclass
class AdaptiveSweep:
    """The result: one row per checkpoint (arrival order), the decision, and where it is recorded."""

    rows: list[SweepRow]
    decision: Decision
    record: Path
    rounds: int = 0
    tokens: list[int] = field(default_factory=list)


def run_dir(sweep: Sweep, checkpoint: Checkpoint, settings: DecideSettings) -> Path:
    config = sweep.inputs.config
    return sweep.request.out_root / (checkpoint.run_name(sweep.family, config.decoding, settings.k_max, config.seed)
                                     + "-decide")


def problem_order(sweep: Sweep) -> list[tuple[str, str]]:
    """Every problem of the sweep as (task, problem id), tasks in order: the pooled problems of the estimand."""
    return [(p.task, p.problem_id) for task in sweep.inputs.tasks.values() for p in task.loaded.problems]


def stored_verdicts(out: Path, problems: list[tuple[str, str]]) -> tuple[np.ndarray, int]:
    """(problems × n verdicts, tokens) of a checkpoint's run, n = the samples every problem holds."""
    store = RunStore(out)
    if not store.exists():
        return np.zeros((len(problems), 0), dtype=bool), 0
    held = held_verdicts(store)
    n = min((len(held.get(key, (np.zeros(0), np.zeros(0)))[1]) for key in problems), default=0)
    rows = [held[key][1][:n] if n else np.zeros(0, dtype=bool) for key in problems]
    tokens = store.read_table(columns=["n_response_tokens"]).column(0).to_pylist()
    return np.array(rows, dtype=bool).reshape(len(problems), n), int(sum(t or 0 for t in tokens))


def _raise_k(out: Path, bound: int, settings: DecideSettings) -> None:
    """Before a round: the run's recorded k becomes the round's bound (so the resume check passes)."""
    store = RunStore(out)
    if not store.exists():
        return
    record = store.read_run()
    mine = record.extra.get(SECTION)
    if not isinstance(mine, dict) or DecideSettings.from_dict(mine) != settings:
        raise Pr1EvalError(f"{out} holds a run that is not this adaptive sweep's (other settings or a fixed-k run); "
                           "pass another --out-root, or rerun with the original settings")
    if record.k != bound:
        store.write_run(dataclasses.replace(record, k=bound))


def draw_round(plan: RunPlan, engine: Any, start: int, end: int, t: int, settings: DecideSettings) -> None:
    """Generate, grade and store samples [start, end) of every problem of one checkpoint's run."""
    with run_lock(plan.out, "pr1-eval sweep --adaptive"):
        check_output(plan.out, plan.record)
        source = LocalChunks(engine, plan.decoding.decoder())
        try:
            prepared = render_prompts(plan.tasks, plan.template, source.tokenizer)
            store = RunStore(plan.out)
            record = dataclasses.replace(plan.record, engine=source.describe(), position_unit=position_unit(
                source.tokenizer), extra={**plan.record.extra, SECTION: settings.to_dict()})
            store.write_run(dataclasses.replace(record, status="running"))
            done = store.finished_keys()
            todo = {name: [(i, missing) for i, p in enumerate(task.loaded.problems)
                           if (missing := [s for s in range(start, end) if (p.task, p.problem_id, s) not in done])]
                    for name, task in prepared.items()}
            if any(todo.values()):
                _generate_all(plan.config, source, prepared, source.plan(todo, plan.config.problems_per_chunk), store,
                              Draw(end - start, start, f"#round{t}"))
            store.write_run(dataclasses.replace(record, **source.summary(), finished_at=now_iso(), status="complete"))
        finally:
            source.close()


def _sample_checkpoint(sweep: Sweep, row: SweepRow, out: Path, bound: int, start: int, t: int,
                       settings: DecideSettings) -> None:
    """Load one checkpoint, draw its round, free it; a failure is recorded on the row, not raised."""
    checkpoint, began = row.checkpoint, time.perf_counter()
    try:
        if checkpoint.problem:
            raise Pr1EvalError(checkpoint.problem)
        if checkpoint.needs_merge:
            ckpts.merge(checkpoint)
        _raise_k(out, bound, settings)
        inputs = dataclasses.replace(sweep.inputs, config=dataclasses.replace(sweep.inputs.config, k=bound))
        plan = derive_plan(inputs, model=str(checkpoint.model_dir), out=str(out), step=checkpoint.step)
        engine = make_engine(plan.config.engine, plan.config.model, **plan.config.engine_options)
        try:
            draw_round(plan, engine, start, bound, t, settings)
        finally:
            _release(engine)
        _record_family(out, sweep.family)
        row.status, row.run_dir = "sampled", out
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - one broken checkpoint must not stop the sweep
        row.status, row.reason = "failed", str(exc) if isinstance(exc, Pr1EvalError) else f"{type(exc).__name__}: {exc}"
        print(f"warning: {checkpoint.path}: {row.reason}; the sweep goes on without it", file=sys.stderr)
    row.seconds += time.perf_counter() - began


def _arrivals(record: Path, sweep: Sweep, settings: DecideSettings) -> tuple[list[Checkpoint], DecideSettings]:
    """The checkpoints in arrival order (the record's first, then new ones by step) and the settings
    with ``planned`` fixed by the first session (a rerun that finds more checkpoints spends the reserve)."""
    found = {str(c.path): c for c in sweep.checkpoints}
    if not record.is_file():
        return list(sweep.checkpoints), dataclasses.replace(settings, planned=settings.planned or len(found))
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        earlier, stored = list(data["arrival_order"]), DecideSettings.from_dict(data["settings"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise Pr1EvalError(f"{record}: not this sweep's record ({exc}); move it away to start the sweep afresh") from None
    if dataclasses.replace(stored, planned=None) != dataclasses.replace(settings, planned=None):
        raise Pr1EvalError(f"{record} was written with other settings ({stored.to_dict()}); rerun with them or pass "
                           "another --out-root")
    order = [found[p] for p in earlier if p in found] + [c for p, c in found.items() if p not in earlier]
    return order, stored


def _write_record(path: Path, order: list[Checkpoint], result: AdaptiveSweep) -> None:
    d = result.decision
    body = {"settings": d.settings.to_dict(), "arrival_order": [str(c.path) for c in order],
            "checkpoints": [{"label": r.checkpoint.label, "run": str(r.run_dir) if r.run_dir else None,
                             "samples_per_problem": d.held[i], "mean": d.means[i], "tokens": result.tokens[i],
                             "eliminated": d.eliminated[i], "open": d.open[i], "status": r.status}
                            for i, r in enumerate(result.rows)],
            "best": d.best, "finished": d.finished, "rounds": result.rounds,
            "pairs": [dataclasses.asdict(p) for p in d.pairs], "updated_at": now_iso()}
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
    temporary.replace(path)


def _state(sweep: Sweep, order: list[Checkpoint], outs: list[Path],
           settings: DecideSettings) -> tuple[Decision, list[int]]:
    problems = problem_order(sweep)
    held = [stored_verdicts(out, problems) for out in outs]
    return decide([v for v, _ in held], settings), [t for _, t in held]


def run_adaptive_sweep(sweep: Sweep, settings: DecideSettings,
                       progress: Callable[[str], None] | None = None) -> AdaptiveSweep:
    """Sample the sweep's checkpoints round by round until the question is decided or k_max is spent."""
    say = progress or (lambda line: print(f"[pr1-eval] {line}", file=sys.stderr, flush=True))
    if sweep.inputs.config.ray:
        raise Pr1EvalError("--adaptive --decide loads one checkpoint at a time on this machine; drop --ray (or serve "
                           "the checkpoints and use --engine openai)")
    settings = settings.check()
    record = sweep.request.out_root / f"{sweep.family}-adaptive-sweep.json"
    order, settings = _arrivals(record, sweep, settings)
    rows = [SweepRow(c) for c in order]
    outs = [run_dir(sweep, c, settings) for c in order]
    bounds = settings.bounds()
    decision, tokens = _state(sweep, order, outs, settings)
    _write_record(record, order, AdaptiveSweep(rows, decision, record, 0, tokens))  # the arrival order, at once
    rounds = 0
    for t, bound in enumerate(bounds):
        want = [i for i, row in enumerate(rows) if row.status != "failed" and decision.open[i]
                and decision.held[i] < bound]
        if decision.finished or not any(decision.open):
            break
        if not want:  # every open checkpoint already holds this round (a resumed sweep)
            continue
        decided = sum(p.verdict != "undecided" for p in decision.pairs)
        say(f"round {t + 1} of ≤ {len(bounds)}: {len(want)} of {len(rows)} checkpoint(s) open, {bound} samples per "
            f"problem; {decided} of {len(decision.pairs)} pair(s) decided")
        for i in want:
            say(f"round {t + 1}: {rows[i].checkpoint.label} ({rows[i].checkpoint.path})")
            _sample_checkpoint(sweep, rows[i], outs[i], bound, decision.held[i], t, settings)
        rounds += 1
        decision, tokens = _state(sweep, order, outs, settings)
        for i, row in enumerate(rows):  # a checkpoint that failed compares with nothing new
            if row.status == "failed":
                decision.open[i] = False
    for i, row in enumerate(rows):
        if row.status != "failed":
            row.run_dir = outs[i] if RunStore(outs[i]).exists() else None
            row.status = "done" if row.run_dir else "not sampled"
    result = AdaptiveSweep(rows, decision, record, rounds, tokens)
    _write_record(record, order, result)
    return result
