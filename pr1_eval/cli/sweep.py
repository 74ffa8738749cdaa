"""``pr1-eval sweep CKPT_ROOT --tasks … [--steps 50,100 | --every N | --last N] [--out-root runs]``:
its options, its handler and its end table.

The sweep itself (checkpoints found once, shared inputs checked once, one plan per checkpoint) is
:mod:`pr1_eval.generate.sweep`; this module turns the options into that request, reads each
finished run's report (mean@k per task, or what an incomplete run lacks) and prints one row per step.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pr1_eval.cli.help import add_command
from pr1_eval.cli.numbers import positive_int
from pr1_eval.cli.options import add_generation_options, add_tasks_option, run_config
from pr1_eval.cli.sweep_adaptive import add_decide_options, decided_sweep
from pr1_eval.records.limit import LIMIT_MARK, LIMIT_WARNING
from pr1_eval.report.tracking import Tracker, add_tracking_options, check_installed, vars_for_log
from pr1_eval.stats.names import metric_name
from pr1_eval.terminal import terminal_text

if TYPE_CHECKING:  # the sweep's imports load when it runs
    from pr1_eval.generate.sweep import SweepRow


SUMMARY = "score every checkpoint of a training job, one run per step"
DESCRIPTION = ("Score every checkpoint of a training job (global_step_N folders), one run per step, with "
               "run's options; finished steps are skipped, and a table of mean@k per step is printed at the end.")
EXAMPLES = ("  pr1-eval sweep checkpoints/ --tasks aime24,amc23 -k 16 --every 100\n"
            "  pr1-eval sweep checkpoints/ --tasks aime24 -k 64 --adaptive --decide best")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``sweep`` to ``pr1-eval``'s commands (its generation options are ``run``'s)."""
    p = add_command(subparsers, "sweep", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("ckpt_root", metavar="CKPT_ROOT", help="folder with global_step_N checkpoints (or HF model folders)")
    add_tasks_option(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--steps", default=None, help="only these steps, e.g. 50,100")
    which.add_argument("--every", type=positive_int, default=None, metavar="N", help="only steps divisible by N")
    which.add_argument("--last", type=positive_int, default=None, metavar="N", help="only the N latest steps")
    p.add_argument("--out-root", default="runs", metavar="DIR",
                   help="where the runs go, one folder per checkpoint (default ./runs)")
    p.add_argument("--family", default=None, metavar="NAME",
                   help="the training job's name: the runs' name prefix and the family analysis groups them by "
                        "(default: CKPT_ROOT's folder name)")
    add_generation_options(p)
    add_tracking_options(p)
    add_decide_options(p)
    p.set_defaults(func=sweep_command)


def sweep_command(args: argparse.Namespace) -> int:
    """Score the checkpoints and print the table: exit 0 when every one was scored, 1 when some failed."""
    from pr1_eval.generate.sweep import SweepRequest, plan_sweep, run_sweep

    check_installed(getattr(args, "log_to", None))  # before any checkpoint is planned or loaded
    request = SweepRequest(Path(args.ckpt_root), Path(args.out_root), args.steps, args.every, args.last, args.family)
    if args.decide:  # the comparison-level rule: pr1_eval.generate.adaptive_sweep
        return decided_sweep(args, request, run_config(args, model=str(args.ckpt_root), adaptive=False))
    sweep = plan_sweep(request, run_config(args, model=str(args.ckpt_root)))
    tracker = Tracker.from_args(args, name=sweep.family, config={"command": "sweep", "family": sweep.family,
                                                                   **vars_for_log(args)})

    def metrics(out: Path) -> tuple[dict[str, Any], list[str]]:
        """The table's numbers, and each scored checkpoint logged as it finishes (live curves)."""
        found = _metrics(out)
        tracker.log_run(out)
        return found

    try:
        rows = run_sweep(sweep, metrics)
    finally:
        tracker.close()
    print("\n" + terminal_text(f"sweep of {sweep.family}: {len(rows)} checkpoint(s) under {args.ckpt_root}, runs in "
                               f"{request.out_root}"))
    if args.limit is not None:  # the numbers below are of a slice: say so with them, in lm-eval's words
        print(f"{LIMIT_MARK} {args.limit}: every run holds only the first {args.limit} problem(s) of each task; "
              f"{LIMIT_WARNING}")
    print(format_sweep_table(rows))
    failed = [r for r in rows if r.status == "failed"]
    if failed:
        print(f"{len(failed)} checkpoint(s) failed (reasons above); rerun the same command to retry them", file=sys.stderr)
    return 1 if failed else 0


def _metrics(out: Path) -> tuple[dict[str, Any], list[str]]:
    """mean@K per task from the report (None where a task is incomplete: the report's own
    completeness check against run.json, as everywhere else), and the report's lines saying what
    an incomplete run lacks (empty when complete)."""
    from pr1_eval.report.load import load_report

    report = load_report(out)
    metrics = {task: None if t.metrics is None else t.metrics.mean for task, t in report.tasks.items()}
    return metrics, [] if report.complete else list(report.incomplete or ["incomplete"])


INCOMPLETE_MARK = "⚠ incomplete"  # the mark analyze and the dashboard print (analysis.common.completeness.MARK)


def format_sweep_table(rows: list[SweepRow]) -> str:
    """One line per checkpoint: step, status, mean@K per task, seconds, run folder or reason.

    A run that lacks samples its run.json declares (the report's check) shows ``⚠`` in place of
    the mean@K of each incomplete task, ``⚠ incomplete`` after its status, and one line below
    the table per such run saying what is missing and how to finish it. Task names, labels,
    folders and reasons come from data: each cell is :func:`~pr1_eval.terminal.terminal_text`.
    """
    tasks = list(dict.fromkeys(t for r in rows for t in r.metrics))
    head = ["step", "status", *[f"{terminal_text(t)} {metric_name('mean', 'k')}" for t in tasks], "seconds",
            "run / reason"]
    table = [head]
    notes = []
    for r in rows:
        gap = "⚠" if r.incomplete else "-"
        values = [gap if r.metrics.get(t) is None else f"{r.metrics[t]:.3f}" for t in tasks]
        step = r.checkpoint.label if r.checkpoint.step is None else str(r.checkpoint.step)
        status = f"{r.status} {INCOMPLETE_MARK}" if r.incomplete else r.status
        step = terminal_text(step)
        table.append([step, status, *values, f"{r.seconds:.1f}",
                      terminal_text(r.run_dir if r.run_dir else r.reason)])
        if r.incomplete:
            notes.append(f"{INCOMPLETE_MARK}: step {step}: {terminal_text('; '.join(r.incomplete))}; rerun the same "
                         "command to finish it (finished samples are kept)")
    widths = [max(len(line[i]) for line in table) for i in range(len(head) - 1)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(line[:-1], widths, strict=True)) + "  " + line[-1] for line in table]
    return "\n".join(lines + notes)
