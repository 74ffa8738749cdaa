"""``pr1-eval merge``: join the runs of a ``--shard`` job array into one run."""

from __future__ import annotations

import argparse

from pr1_eval.cli import report
from pr1_eval.cli.help import add_command

SUMMARY = "join the --shard runs of a job array into one run"
DESCRIPTION = ("Join the runs of a --shard job array into one run. Refused, with every reason named, unless the "
               "shards share their settings and together hold every problem once. A lone shard reports as "
               "incomplete until merged.")
EXAMPLES = "  pr1-eval merge runs/m-shard0of2 runs/m-shard1of2 --out runs/m"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "merge", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("shards", nargs="+", metavar="SHARD_RUN", help="the shard run folders (every index 0..N-1 once)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the merged run (must not hold a run)")
    p.set_defaults(func=_cmd_merge)


def _cmd_merge(args: argparse.Namespace) -> int:
    from pr1_eval.scaleout.merge import merge_shards

    out = merge_shards(args.shards, args.out)
    print(f"merged {len(args.shards)} shards into {out}")
    report.print_report(out)
    return 0
