"""Score every checkpoint of a training job, one run per checkpoint (``pr1-eval sweep``, ``pr1-repro score``).

Why a sweep of its own rather than a shell loop over ``pr1-eval run``: the inputs that do not
depend on the model (tasks, prompt, decoding and their checks) are read and checked once for all
checkpoints (:func:`~pr1_eval.generate.plan.plan_inputs`), and one plan is derived per checkpoint
(output folder and model checked there, before its model loads); each checkpoint's model is loaded
once and freed before the next; a checkpoint that cannot be loaded is reported and the sweep goes
on; a rerun skips finished runs without loading their model and resumes unfinished ones.

Checkpoints are found and merged by :mod:`pr1_eval.inputs.checkpoints`. Runs are named
``<family>-step<N>-<decoding>-k<k>-seed<seed>`` under the output root, where the family is the
checkpoint root's folder name (:mod:`pr1_eval.records.steps`); ``run.json`` records the step and
the family (``model.step``, ``model.family``), which is how ``analyze`` and ``leaderboard`` group
them. Reading the reports of the finished runs is the caller's (``metrics``): the command prints
them as a table (:mod:`pr1_eval.cli.sweep`).
"""

from __future__ import annotations

import dataclasses
import gc
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pr1_eval.engines.factory import make_engine
from pr1_eval.errors import Pr1EvalError
from pr1_eval.generate.config import RunConfig
from pr1_eval.generate.plan import PlannedTask, RunInputs, derive_plan, plan_inputs
from pr1_eval.generate.runner import execute
from pr1_eval.inputs import checkpoints as ckpts
from pr1_eval.inputs.checkpoints import Checkpoint
from pr1_eval.records.steps import family_name
from pr1_eval.report.completeness import check_run
from pr1_eval.store.run_lock import run_lock
from pr1_eval.store.run_store import RunStore
from pr1_eval.terminal import terminal_text

Metrics = Callable[[Path], tuple[dict[str, Any], list[str]]]
"""A finished run's mean@k per task (None where incomplete) and the lines saying what it lacks."""


@dataclass(frozen=True)
class SweepRequest:
    """Which checkpoints to score and where their runs go."""

    ckpt_root: Path
    out_root: Path = Path("runs")
    steps: str | None = None  # "50,100": only these steps (each must exist)
    every: int | None = None  # only steps divisible by N
    last: int | None = None  # only the N latest steps
    family: str | None = None  # the runs' family and name prefix (default: the root's folder name)


@dataclass
class SweepRow:
    """One line of the end table."""

    checkpoint: Checkpoint
    status: str = "pending"  # done | resumed | finished earlier | failed
    run_dir: Path | None = None
    reason: str | None = None
    seconds: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)
    incomplete: list[str] = field(default_factory=list)  # the report's lines when the run is incomplete


@dataclass(frozen=True)
class Sweep:
    """A planned sweep: the checkpoints to score, their family and the inputs every run shares."""

    request: SweepRequest
    checkpoints: list[Checkpoint]
    family: str
    inputs: RunInputs

    def run_dir(self, checkpoint: Checkpoint) -> Path:
        config = self.inputs.config
        return self.request.out_root / checkpoint.run_name(self.family, config.decoding, config.k, config.seed)


def plan_sweep(request: SweepRequest, config: RunConfig) -> Sweep:
    """Find and select the checkpoints, then read and check the shared inputs once (before any model loads).

    ``config`` holds the generation options (its model, output folder and step are each checkpoint's).
    """
    if config.shard:
        raise Pr1EvalError("--shard splits one run over a job array; a sweep scores whole checkpoints (use "
                           "pr1-eval run --model CKPT --shard I/N for one checkpoint, then pr1-eval merge)")
    chosen = ckpts.select_steps(ckpts.discover_checkpoints(request.ckpt_root), request.steps, request.every,
                                request.last)
    if not chosen:
        raise Pr1EvalError(f"no checkpoint of {request.ckpt_root} matches --every/--last")
    unmerged = [c for c in chosen if c.needs_merge]
    if unmerged and not ckpts.verl_available():
        raise Pr1EvalError(ckpts.merge_hint(unmerged[0])
                           + (f" (and {len(unmerged) - 1} more step(s))" if len(unmerged) > 1 else ""))
    family = request.family or family_name(request.ckpt_root)
    if config.engine == "openai":
        config = _served_checkpoints(config, len(chosen))
    return Sweep(request, chosen, family, plan_inputs(config))


def _served_checkpoints(config: RunConfig, checkpoints: int) -> RunConfig:
    """``--engine openai``: each checkpoint must be served under its own name (its folder's path or
    name, vLLM's ``--served-model-name``), never "the one model the server serves", which would
    score one model under every step's name."""
    if config.engine_options.get("served_model") and checkpoints > 1:
        raise Pr1EvalError(f"--served-model names one model, but the sweep has {checkpoints} checkpoints; serve each "
                           "under its folder's name (vllm serve CKPT --served-model-name global_step_N) and drop "
                           "--served-model")
    return dataclasses.replace(config, engine_options={**config.engine_options, "exact_model": True})


def _finished(out: Path, tasks: dict[str, PlannedTask] | Any) -> bool:
    """The run at ``out`` is complete for exactly these tasks and problems (so its model need not load)."""
    store = RunStore(out)
    if not store.exists():
        return False
    check = check_run(out)
    declared = store.read_run().tasks
    return check.complete and all(
        name in declared and (declared[name].n_problems or -1) == len(task.loaded.problems)
        and check.tasks.get(name) is not None and check.tasks[name].complete
        for name, task in tasks.items())


def _record_family(out: Path, family: str) -> None:
    """``model.family`` in run.json, so analysis groups the sweep's runs as one training job."""
    store = RunStore(out)
    record = store.read_run()
    if record.model.family != family:
        store.write_run(dataclasses.replace(record, model=dataclasses.replace(record.model, family=family)))


def _release(engine: Any) -> None:
    """Free a checkpoint's model before the next one loads (vLLM's own cleanup when it is loaded)."""
    close = getattr(engine, "close", None)
    if callable(close):
        close()
    del engine
    gc.collect()
    if "vllm" in sys.modules:
        try:
            from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

            cleanup_dist_env_and_memory()
        except Exception:  # noqa: BLE001 - an older vLLM without it: gc + empty_cache below
            pass
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def score_checkpoint(row: SweepRow, sweep: Sweep, metrics: Metrics) -> None:
    """Score one checkpoint into ``row`` (status, reason, metrics); only Ctrl-C escapes."""
    checkpoint, out = row.checkpoint, sweep.run_dir(row.checkpoint)
    started = time.perf_counter()
    try:
        if checkpoint.problem:
            raise Pr1EvalError(checkpoint.problem)
        with run_lock(out, "pr1-eval sweep"):  # one writer per run (pr1_eval.store.run_lock)
            _score_locked(row, sweep, out)
        row.run_dir = out
        row.metrics, row.incomplete = metrics(out)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - one broken checkpoint must not stop the sweep
        row.status, row.reason = "failed", str(exc) if isinstance(exc, Pr1EvalError) else f"{type(exc).__name__}: {exc}"
    row.seconds = time.perf_counter() - started


def _score_locked(row: SweepRow, sweep: Sweep, out: Path) -> None:
    """Generate (or find finished) the checkpoint's run and record its family, under its lock."""
    checkpoint = row.checkpoint
    if _finished(out, sweep.inputs.tasks):
        row.status = "finished earlier"
    else:
        if checkpoint.needs_merge:
            ckpts.merge(checkpoint)
        # the output folder and the model folder, checked before the model loads
        plan = derive_plan(sweep.inputs, model=str(checkpoint.model_dir), out=str(out), step=checkpoint.step)
        config = plan.config
        engine = None if config.ray else make_engine(config.engine, config.model, **config.engine_options)
        try:
            execute(plan, engine)
        finally:
            if engine is not None:
                _release(engine)
        row.status = "resumed" if plan.resumes else "done"
    _record_family(out, sweep.family)


def run_sweep(sweep: Sweep, metrics: Metrics) -> list[SweepRow]:
    """Score every checkpoint of ``sweep`` in step order; a failed one is reported and skipped."""
    from tqdm.auto import tqdm

    rows = [SweepRow(c) for c in sweep.checkpoints]
    with tqdm(total=len(rows), desc="checkpoints", unit="ckpt", disable=None) as bar:
        for i, row in enumerate(rows, start=1):
            bar.set_postfix_str(row.checkpoint.label)
            if bar.disable:  # off a terminal (a job log) the bar is silent: say which checkpoint runs
                print(f"[pr1-eval] checkpoint {i}/{len(rows)}: {row.checkpoint.label} ({row.checkpoint.path})",
                      file=sys.stderr, flush=True)
            score_checkpoint(row, sweep, metrics)
            if bar.disable:
                print(f"[pr1-eval] checkpoint {i}/{len(rows)}: {row.checkpoint.label} {row.status} "
                      f"in {row.seconds:.0f} s", file=sys.stderr, flush=True)
            if row.status == "failed":
                print(terminal_text(f"warning: {row.checkpoint.path}: {row.reason}; going on with the next checkpoint"),
                      file=sys.stderr)
            bar.update(1)
    return rows
