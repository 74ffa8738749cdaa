"""``pr1-eval replay``: test-time controllers replayed offline on recorded branches.

Why offline: a controller (self-consistency, ESC, ASC, Parallel-Probe) decides how many branches
to read and how far; with every branch's probe answers and token count recorded, its accuracy and
cost follow without generating a token, so controllers are compared on the same samples in
seconds. The rules and the protocol (seeded branch orders, token accounting) are the Parallel-Probe
authors' (:mod:`pr1_eval.replay`); ``--authors`` prints their published figures beside ours.

A plugin of ``pr1-eval`` (entry point ``pr1_eval.commands``) because the frontier figure
(``--html``) is drawn by :mod:`analysis.efficiency.frontier`; the replay itself is ``pr1_eval``'s.
"""

from __future__ import annotations

import argparse
from typing import Any

from pr1_eval.cli.help import add_command

SUMMARY = "replay test-time controllers (SC, ESC, ASC, Parallel-Probe) offline on recorded branches"
DESCRIPTION = ("Replay test-time controllers on recorded branches (an imported Parallel-Probe run, or its "
               "trajectory file): accuracy, tokens per question and sequential tokens, averaged over seeded "
               "branch orders (seeds 0-99, the authors' protocol). Without --controller it prints the rows of "
               "the Parallel-Probe authors' table: sc@64, esc@64, asc@64, sac, sc+sac@64, probe@64, probe-all@64.")
EXAMPLES = ("  pr1-eval replay runs/q8b-aime24\n"
            "  pr1-eval replay Qwen3-8B-128__aime24.json --authors AUTHORS_RAW.csv\n"
            "  pr1-eval replay runs/q8b --controller sc@16 --controller probe@16:stable=10\n"
            "  pr1-eval replay runs/q8b --match grader --html frontier.html")


def register(subparsers: Any) -> None:
    """Add ``replay`` to an argparse subparsers object (the ``pr1_eval.commands`` hook)."""
    p = add_command(subparsers, "replay", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("sources", nargs="+", metavar="RUN_OR_FILE",
                   help="an imported probed run (pr1-eval import --format parallel-probe) or a trajectory file")
    p.add_argument("--controller", action="append", default=None, metavar="SPEC",
                   help="NAME@N[:key=value,...], repeatable: sc, esc (window), asc (threshold), sac and sc+sac "
                        "(patience, warmup_steps, burst), probe and probe-all (stable, patience, warm_up, burst, "
                        "max_steps) (default: the authors' seven rows)")
    p.add_argument("--seeds", type=_positive, default=100, metavar="N",
                   help="branch orders to average over: seeds 0..N-1 (default: 100, the authors')")
    p.add_argument("--match", choices=("exact", "grader"), default="exact",
                   help="exact: the answer string equals the gold (the authors'); grader: pr1-eval's grader")
    p.add_argument("--authors", action="append", default=None, metavar="CSV",
                   help="an authors' *_raw.csv; its figures print beside ours (repeat one per task; matched by the "
                        "task in the file name)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the rows as JSON")
    out.add_argument("--csv", action="store_true", help="print the rows as CSV")
    p.add_argument("--html", default=None, metavar="OUT", help="also write the accuracy-against-tokens figure here")
    p.set_defaults(func=run_replay)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"{value} is outside 1..10000")
    return value


def run_replay(args: argparse.Namespace) -> int:
    """The ``replay`` handler (the work loads here: grader, store, pandas, plotly)."""
    from analysis.efficiency.replay_report import replay_command

    return replay_command(args)
