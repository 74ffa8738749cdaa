"""``pr1-eval report``: print the metrics of a stored run."""

from __future__ import annotations

import argparse

from pr1_eval.cli.help import add_command

SUMMARY = "metrics of a run"
DESCRIPTION = ("Print the metrics of a run: per task mean@k, pass@k with 95% intervals, best@k, maj@k, the "
               "paper-compatible figures, parallel ratio and format rate. An incomplete run (stopped, a lone "
               "shard, part of a benchmark) is marked and its numbers starred.")
EXAMPLES = ("  pr1-eval report runs/RUN\n"
            "  pr1-eval report runs/RUN --json --strict   # exit 2 when incomplete")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "report", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("run", metavar="RUN", help="run folder (the one holding run.json)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--strict", action="store_true", help="exit 2 when the run is incomplete (missing problems or samples)")
    p.set_defaults(func=_cmd_report)


def _cmd_report(args: argparse.Namespace) -> int:
    from pr1_eval.cli.commands import print_report

    print_report(args.run, as_json=args.json, strict=args.strict)
    return 0
