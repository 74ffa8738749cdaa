"""``pr1-eval report``: print the metrics of a stored run.

:func:`print_report` is also what ``run``, ``merge``, ``regrade``, ``import`` and the demo call to
show the run they just wrote. Registering the command imports nothing heavy (every ``pr1-eval``
start registers it); the report's stack (pandas, the store) loads when a report is printed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from pr1_eval.cli.help import add_command
from pr1_eval.errors import Pr1EvalError
from pr1_eval.terminal import terminal_text

if TYPE_CHECKING:
    from pr1_eval.report.schema import RunReport

SUMMARY = "metrics of a run"
DESCRIPTION = ("Print the metrics of a run: per task mean@k, pass@k with 95% intervals, best@k, maj@k, the "
               "paper-compatible figures, parallel ratio and format rate. An incomplete run (stopped, a lone "
               "shard, part of a benchmark) is marked and its numbers starred.")
EXAMPLES = ("  pr1-eval report runs/RUN\n"
            "  pr1-eval report runs/RUN --at 1,4,16,64   # pass/best/maj at each K\n"
            "  pr1-eval report runs/RUN --json --strict   # exit 2 when incomplete")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "report", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("run", metavar="RUN", help="run folder (the one holding run.json)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--strict", action="store_true", help="exit 2 when the run is incomplete (missing problems or samples)")
    p.add_argument("--at", metavar="K,K,...", type=at_values, default=(),
                   help="also give pass@K, best@K and maj@K (with 95%% intervals) at each K, for every task whose "
                        "samples per problem reach K (default: only at the task's k)")
    p.set_defaults(func=_cmd_report)


def at_values(text: str) -> tuple[int, ...]:
    """``--at 1,4,16``: positive integers, comma-separated."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"--at {text!r}: give positive integers separated by commas, e.g. 1,4,16")
    return values


def _cmd_report(args: argparse.Namespace) -> int:
    print_report(args.run, as_json=args.json, strict=args.strict, at=args.at)
    return 0


def print_report(run_dir: str | Path, as_json: bool = False, strict: bool = False,
                 at: tuple[int, ...] = ()) -> RunReport:
    """Print the report (table or JSON); with ``strict`` an incomplete run is an error (exit 2);
    ``at``: the Ks of the at-K table (``--at``)."""
    from pr1_eval.report.latency_table import format_latency_table
    from pr1_eval.report.load import load_report, replaced_line
    from pr1_eval.report.table import (
        at_not_given,
        format_at_table,
        format_forkjoin_table,
        format_report_table,
        format_variance_table,
    )

    report = load_report(run_dir, at=at)
    replaced = replaced_line(run_dir)
    if as_json:
        document = report.to_json()
        if at:  # a K above a task's samples is named, never dropped silently (the text table does the same)
            document["at_not_given"] = at_not_given(report, at)
        print(json.dumps(document, indent=2, default=str))
    else:
        status = "" if report.status == "complete" else f"  (status: {report.status})"
        shard = f"  ({report.shard})" if report.shard else ""
        print(f"run: {terminal_text(run_dir)}{shard}{status}")
        if replaced:
            print(f"note: {terminal_text(replaced)}")
        print(format_report_table(report))
        variance = format_variance_table(report)
        if variance is not None:
            print(f"\n{variance}")
        if at:
            print(f"\n{format_at_table(report, at)}")
        forkjoin = format_forkjoin_table(report)
        if forkjoin is not None:
            print(f"\n{forkjoin}")
        latency = format_latency_table(report)
        if latency is not None:
            print(f"\n{latency}")
    if strict and not report.complete:
        raise Pr1EvalError(terminal_text(f"{run_dir} is incomplete (--strict): {'; '.join(report.incomplete)}; "
                                         f"{report.advice}"))
    return report
