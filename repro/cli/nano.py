"""``pr1-repro nano``: the whole curriculum on a tiny model on CPU, through VERL's own trainers."""

from __future__ import annotations

import argparse
from pathlib import Path

from pr1_eval.errors import Pr1EvalError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("nano", help="train the whole curriculum on a tiny model on CPU (VERL's own trainers)",
                       description="Run every stage of the curriculum (Seen: SFT, RL on GSM8K, RL on DAPO; Unseen: "
                                   "structured SFT, S1, S2, mid-training) on pr1-eval's tiny model, on CPU, through "
                                   "`pr1-repro run` and VERL's unmodified trainers, then score the merged checkpoints "
                                   "(pr1-eval sweep), rank them and analyse the per-step rollout runs. Prints VERL's "
                                   "metric lines as it goes and a table of checks at the end (exit 1 if one fails). "
                                   "The full plan takes about 40 minutes on two cores, the CI slice about 10.",
                       epilog="example:\n  pr1-repro nano --out pr1-nano\n  pr1-eval dashboard pr1-nano")
    p.add_argument("--out", default="pr1-nano", metavar="DIR", help="where checkpoints, logs, runs and nano.json go")
    p.add_argument("--plan", default="full", choices=["full", "ci"],
                   help="full: every stage; ci: Seen SFT, Seen GRPO and Unseen GRPO for a few steps")
    p.add_argument("--no-score", action="store_true", help="skip the sweep, leaderboard and analysis at the end")
    p.add_argument("--fresh", action="store_true", help="delete --out first when it holds an earlier job")
    p.set_defaults(func=cmd_nano)


def cmd_nano(args: argparse.Namespace, extra: list[str]) -> int:
    """The whole curriculum on a tiny model on CPU, through VERL's own trainers (``repro.nano``)."""
    from repro.nano.job import run_nano, summary_table

    if extra:
        raise Pr1EvalError(f"nano takes no arguments after `--` (got {' '.join(extra)})")
    report = run_nano(Path(args.out), plan=args.plan, score=not args.no_score, fresh=args.fresh)
    print(summary_table(report))
    return 0 if report.passed else 1
