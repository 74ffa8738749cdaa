"""``pr1-eval sweep CKPT_ROOT --tasks … [--steps 50,100 | --every N | --last N] [--out-root runs]``.

Scores every checkpoint of a training job, one run per checkpoint. Why a command of its own
rather than a shell loop over ``pr1-eval run``: the checks that cost a second (tasks, prompt,
decoding) run once before any model loads; each checkpoint's model is loaded once and freed
before the next; a checkpoint that cannot be loaded is reported and the sweep goes on; a
rerun skips finished runs without loading their model and resumes unfinished ones; and the end
table has one row per step.

Checkpoints are found under ``CKPT_ROOT`` (or ``CKPT_ROOT`` is one): ``global_step_N`` folders
(a Hugging Face folder itself, a merged ``global_step_N/hf``, or VERL's raw FSDP shards in
``global_step_N/actor`` or ``global_step_N``) and other Hugging Face folders (a ``config.json``;
the step is read from ``checkpoint-N``/``step_N`` names, else it is unknown). Raw shards are
merged to ``global_step_N/hf`` by ``repro``'s merge (VERL's model merger), run as a subprocess
because ``pr1_eval`` never imports ``repro``; without VERL installed the sweep stops before
generating anything, with one line saying how to merge.

Runs are named ``<family>-step<N>-<decoding>-k<k>-seed<seed>`` under ``--out-root``, where the
family is ``CKPT_ROOT``'s folder name; ``run.json`` records the step and the family
(``model.step``, ``model.family``), which is how ``analyze`` and ``leaderboard`` group them.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib.util
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.report.names import metric_name

_GLOBAL_STEP = re.compile(r"^global_step_(\d+)$")
_OTHER_STEP = re.compile(r"(?:checkpoint|step)[-_]?(\d+)$")
MERGED = "hf"  # where repro's merge writes the Hugging Face folder of a VERL step


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint: where it was found, the Hugging Face folder to load, and VERL shards to merge first."""

    path: Path
    step: int | None
    model_dir: Path
    shards: Path | None = None  # VERL FSDP shards (fsdp_config.json) still to be merged into model_dir
    problem: str | None = None  # why it cannot be scored (reported, the sweep goes on)

    @property
    def label(self) -> str:
        return f"step{self.step}" if self.step is not None else self.path.name


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


# ----- discovery ------------------------------------------------------------------------------
def _shard_dir(folder: Path) -> Path | None:
    """Where VERL saved FSDP shards: ``actor/`` (PPO) or the step folder itself (SFT)."""
    for candidate in (folder / "actor", folder):
        if (candidate / "fsdp_config.json").is_file():
            return candidate
    return None


def _as_checkpoint(folder: Path) -> Checkpoint | None:
    """The checkpoint in ``folder``, or None when it is not one (an unrelated folder)."""
    match = _GLOBAL_STEP.match(folder.name)
    if match:
        step = int(match.group(1))
        if (folder / MERGED / "config.json").is_file():
            return Checkpoint(folder, step, folder / MERGED)
        if (folder / "config.json").is_file():
            return Checkpoint(folder, step, folder)
        shards = _shard_dir(folder)
        if shards is not None:
            return Checkpoint(folder, step, folder / MERGED, shards=shards)
        return Checkpoint(folder, step, folder, problem="no config.json, no merged hf/ folder and no VERL shards "
                                                        "(fsdp_config.json) in it or in actor/")
    if (folder / "config.json").is_file():
        other = _OTHER_STEP.search(folder.name)
        return Checkpoint(folder, int(other.group(1)) if other else None, folder)
    return None


def discover_checkpoints(root: str | Path) -> list[Checkpoint]:
    """Every checkpoint under ``root`` (or ``root`` itself), by step (unknown steps last, by name)."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise Pr1EvalError(f"checkpoint folder {root} does not exist or is not a folder; pass the folder holding "
                           "global_step_N checkpoints (or one Hugging Face model folder)")
    itself = _as_checkpoint(root)
    found = [itself] if itself is not None else [c for d in sorted(root.iterdir()) if d.is_dir()
                                                 for c in [_as_checkpoint(d)] if c is not None]
    if not found:
        raise Pr1EvalError(f"no checkpoints under {root}: expected global_step_N folders or Hugging Face model "
                           "folders (with config.json)")
    return sorted(found, key=lambda c: (c.step is None, c.step or 0, c.path.name))


def select_steps(checkpoints: list[Checkpoint], steps: str | None = None, every: int | None = None,
                 last: int | None = None) -> list[Checkpoint]:
    """``--steps 50,100`` (each must exist), ``--every N`` (steps divisible by N) or ``--last N``."""
    numbered = [c for c in checkpoints if c.step is not None]
    if steps:
        try:
            wanted = [int(s) for s in steps.split(",") if s.strip()]
        except ValueError:
            raise Pr1EvalError(f"--steps {steps!r}: expected comma-separated integers, e.g. --steps 50,100") from None
        have = {c.step: c for c in numbered if c.step is not None}
        missing = [s for s in wanted if s not in have]
        if missing:
            raise Pr1EvalError(f"--steps: no checkpoint for step(s) {', '.join(map(str, missing))}; found steps "
                               f"{', '.join(str(s) for s in sorted(have)) or 'none'}")
        return [have[s] for s in sorted(set(wanted))]
    if every is not None:
        if every < 1:
            raise Pr1EvalError(f"--every must be at least 1, got {every}")
        return [c for c in numbered if c.step is not None and c.step % every == 0]
    if last is not None:
        if last < 1:
            raise Pr1EvalError(f"--last must be at least 1, got {last}")
        return numbered[-last:]
    return checkpoints


# ----- merging VERL shards --------------------------------------------------------------------
def verl_available() -> bool:
    return importlib.util.find_spec("verl") is not None


def merge_hint(checkpoint: Checkpoint) -> str:
    return (f"{checkpoint.path} holds VERL FSDP shards that must be merged to a Hugging Face folder first: install "
            f"VERL (pip install -e '.[repro]') and rerun, or merge it yourself with `pr1-repro merge {checkpoint.path}` "
            f"(python -m verl.model_merger merge --backend fsdp --local_dir {checkpoint.shards} "
            f"--target_dir {checkpoint.model_dir})")


def merge_command(checkpoint: Checkpoint) -> list[str]:
    """repro's merge of one step (writes ``global_step_N/hf``), in its own interpreter."""
    return [sys.executable, "-m", "repro.cli", "merge", str(checkpoint.path)]


def merge(checkpoint: Checkpoint) -> None:
    """Merge a VERL step into its Hugging Face folder; raises Pr1EvalError when that fails."""
    done = subprocess.run(merge_command(checkpoint), check=False)
    if done.returncode != 0 or not (checkpoint.model_dir / "config.json").is_file():
        raise Pr1EvalError(f"merging {checkpoint.path} failed (exit {done.returncode}); see the merger's output above")


# ----- one checkpoint -------------------------------------------------------------------------
def family_name(root: str | Path) -> str:
    """The training job's name: the checkpoint root's folder (its parent when it is one step)."""
    root = Path(root).expanduser().resolve()
    return root.parent.name if _GLOBAL_STEP.match(root.name) else root.name


def run_name(family: str, checkpoint: Checkpoint, decoding: str, k: int, seed: int) -> str:
    return f"{family}-{checkpoint.label}-{decoding}-k{k}-seed{seed}"


def _finished(out: Path, tasks: dict[str, Any]) -> bool:
    """The run at ``out`` is complete for exactly these tasks and problems (so its model need not load)."""
    from pr1_eval.report.completeness import check_run
    from pr1_eval.store.run_store import RunStore

    store = RunStore(out)
    if not store.exists():
        return False
    check = check_run(out)
    declared = store.read_run().tasks
    return check.complete and all(
        name in declared and (declared[name].n_problems or -1) == len(task.problems)
        and check.tasks.get(name) is not None and check.tasks[name].complete
        for name, task in tasks.items())


def _record_family(out: Path, family: str) -> None:
    """``model.family`` in run.json, so analysis groups the sweep's runs as one training job."""
    from pr1_eval.store.run_store import RunStore

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


def score_checkpoint(row: SweepRow, config: Any, tasks: dict[str, Any], family: str) -> None:
    """Score one checkpoint into ``row`` (status, reason, metrics); only Ctrl-C escapes."""
    from pr1_eval.engines.factory import make_engine
    from pr1_eval.generate.preflight import preflight_run
    from pr1_eval.generate.runner import run_eval

    checkpoint, out = row.checkpoint, Path(config.out)
    started = time.perf_counter()
    try:
        if checkpoint.problem:
            raise Pr1EvalError(checkpoint.problem)
        if _finished(out, tasks):
            row.status = "finished earlier"
        else:
            if checkpoint.shards is not None and not (checkpoint.model_dir / "config.json").is_file():
                merge(checkpoint)
            resumes = preflight_run(config).resumes  # model folder, output folder: before the model loads
            engine = None if getattr(config, "ray", None) else make_engine(config.engine, config.model, **config.engine_options)
            try:
                run_eval(config, engine=engine)
            finally:
                if engine is not None:
                    _release(engine)
            row.status = "resumed" if resumes else "done"
        _record_family(out, family)
        row.run_dir = out
        row.metrics, row.incomplete = _metrics(out)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - one broken checkpoint must not stop the sweep
        row.status, row.reason = "failed", str(exc) if isinstance(exc, Pr1EvalError) else f"{type(exc).__name__}: {exc}"
    row.seconds = time.perf_counter() - started


def _metrics(out: Path) -> tuple[dict[str, Any], list[str]]:
    """mean@K per task from the report (None where a task is incomplete: the report's own
    completeness check against run.json, as everywhere else), and the report's lines saying what
    an incomplete run lacks (empty when complete)."""
    from pr1_eval.report.load import load_report

    report = load_report(out)
    metrics = {task: None if t.metrics is None else t.metrics.mean for task, t in report.tasks.items()}
    return metrics, [] if report.complete else list(report.incomplete or ["incomplete"])


# ----- the command ----------------------------------------------------------------------------
def _run_config(args: argparse.Namespace, checkpoint: Checkpoint, out: Path) -> Any:
    """A RunConfig for one checkpoint from the sweep's options (built exactly as ``run`` builds its own)."""
    from pr1_eval.cli.options import run_config

    return run_config(args, model=str(checkpoint.model_dir), out=str(out), step=checkpoint.step)


def _shared_checks(config: Any) -> dict[str, Any]:
    """Checks that do not depend on the checkpoint, once, before any model loads; returns the tasks."""
    from pr1_eval.generate.preflight import (
        check_decoding,
        check_engine,
        check_k,
        check_limit,
        check_prompt,
        check_tasks,
    )
    from pr1_eval.generate.sampling_limits import check_sampling_limits

    check_k(config.k)
    check_limit(config.limit)
    check_sampling_limits(config)
    tasks = check_tasks(list(config.tasks), config.data_dir, config.limit, getattr(config, "data_source", "auto"))
    check_prompt(config.prompt, config.data_dir)
    # With --ray the engines load in the replicas, so vllm need not be installed on this driver.
    engine_name = config.engine if getattr(config, "ray", None) else check_engine(config.engine)
    from pr1_eval.decoding.factory import path_options

    check_decoding(config.decoding, engine_name, config.paths, config.max_blocks, config.after_last_block,
                   path_options(config))
    return tasks


INCOMPLETE_MARK = "⚠ incomplete"  # the mark analyze and the dashboard print (analysis.completeness.MARK)


def format_sweep_table(rows: list[SweepRow]) -> str:
    """One line per checkpoint: step, status, mean@K per task, seconds, run folder or reason.

    A run that lacks samples its run.json declares (the report's check) shows ``⚠`` in place of
    the mean@K of each incomplete task, ``⚠ incomplete`` after its status, and one line below
    the table per such run saying what is missing and how to finish it.
    """
    tasks = list(dict.fromkeys(t for r in rows for t in r.metrics))
    head = ["step", "status", *[f"{t} {metric_name('mean', 'k')}" for t in tasks], "seconds", "run / reason"]
    table = [head]
    notes = []
    for r in rows:
        gap = "⚠" if r.incomplete else "-"
        values = [gap if r.metrics.get(t) is None else f"{r.metrics[t]:.3f}" for t in tasks]
        step = r.checkpoint.label if r.checkpoint.step is None else str(r.checkpoint.step)
        status = f"{r.status} {INCOMPLETE_MARK}" if r.incomplete else r.status
        table.append([step, status, *values, f"{r.seconds:.1f}", str(r.run_dir) if r.run_dir else str(r.reason)])
        if r.incomplete:
            notes.append(f"{INCOMPLETE_MARK}: step {step}: {'; '.join(r.incomplete)}; rerun the same command to "
                         "finish it (finished samples are kept)")
    widths = [max(len(line[i]) for line in table) for i in range(len(head) - 1)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(line[:-1], widths, strict=True)) + "  " + line[-1] for line in table]
    return "\n".join(lines + notes)


def run_sweep(args: argparse.Namespace) -> int:
    """The ``sweep`` handler: exit 0 when every checkpoint was scored, 1 when some failed."""
    from tqdm.auto import tqdm

    if getattr(args, "shard", None):
        raise Pr1EvalError("--shard splits one run over a job array; a sweep scores whole checkpoints (use "
                           "pr1-eval run --model CKPT --shard I/N for one checkpoint, then pr1-eval merge)")
    checkpoints = select_steps(discover_checkpoints(args.ckpt_root), args.steps, args.every, args.last)
    if not checkpoints:
        raise Pr1EvalError(f"no checkpoint of {args.ckpt_root} matches --every/--last")
    unmerged = [c for c in checkpoints if c.shards is not None and not (c.model_dir / "config.json").is_file()]
    if unmerged and not verl_available():
        raise Pr1EvalError(merge_hint(unmerged[0]) + (f" (and {len(unmerged) - 1} more step(s))" if len(unmerged) > 1 else ""))
    family = family_name(args.ckpt_root)
    out_root = Path(args.out_root)
    rows = [SweepRow(c) for c in checkpoints]
    configs = [_run_config(args, c, out_root / run_name(family, c, args.decoding, args.k, args.seed)) for c in checkpoints]
    tasks = _shared_checks(configs[0])
    with tqdm(total=len(rows), desc="checkpoints", unit="ckpt", disable=None) as bar:
        for row, config in zip(rows, configs, strict=True):
            bar.set_postfix_str(row.checkpoint.label)
            score_checkpoint(row, config, tasks, family)
            if row.status == "failed":
                print(f"warning: {row.checkpoint.path}: {row.reason}; going on with the next checkpoint", file=sys.stderr)
            bar.update(1)
    print(f"\nsweep of {family}: {len(rows)} checkpoint(s) under {args.ckpt_root}, runs in {out_root}")
    print(format_sweep_table(rows))
    failed = [r for r in rows if r.status == "failed"]
    if failed:
        print(f"{len(failed)} checkpoint(s) failed (reasons above); rerun the same command to retry them", file=sys.stderr)
    return 1 if failed else 0


def add_parser(sub: Any) -> None:
    """``pr1-eval sweep`` (its generation options are ``run``'s)."""
    from pr1_eval.cli.options import add_generation_options

    p = sub.add_parser("sweep", help="score every checkpoint of a training job, one run per step",
                       description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("ckpt_root", metavar="CKPT_ROOT", help="folder with global_step_N checkpoints (or HF model folders)")
    p.add_argument("--tasks", required=True, help="comma-separated: aime24,aime25,amc23,math500,math300_pr1,gsm8k or 'all'")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--steps", default=None, help="only these steps, e.g. 50,100")
    which.add_argument("--every", type=int, default=None, metavar="N", help="only steps divisible by N")
    which.add_argument("--last", type=int, default=None, metavar="N", help="only the N latest steps")
    p.add_argument("--out-root", default="runs", help="where the runs go, one folder per checkpoint (default ./runs)")
    add_generation_options(p)
    p.set_defaults(func=run_sweep)
