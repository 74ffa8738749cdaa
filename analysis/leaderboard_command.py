"""Registers ``pr1-eval leaderboard`` without importing the analysis stack.

Exposed through the ``pr1_eval.commands`` entry-point group (``pr1_eval`` must not import
``analysis``); ``pr1-eval`` calls :func:`register` on every start, so this module imports nothing
heavy and the handler (:mod:`analysis.leaderboard_cli`: pandas, plotly) loads only when the
command runs.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    """Add ``leaderboard`` to an argparse subparsers object (the ``pr1_eval.commands`` hook)."""
    p = subparsers.add_parser(
        "leaderboard", help="rank runs/checkpoints per task with paired tests of which differences are real",
        description="Rank runs (or the checkpoints of a sweep): one row per run with mean@K and its 95% interval, "
                    "pass@K, pass@K_paper, maj@K and parallel ratio per task and averaged. Rows not significantly "
                    "below the row above are marked tied; every run is compared with a baseline on the problems "
                    "they share (paired bootstrap, sign-flip test, Holm correction).",
        epilog="examples:\n  pr1-eval leaderboard runs/\n  pr1-eval leaderboard runs/ --baseline runs/base --markdown\n"
               "  pr1-eval leaderboard runs/ --html leaderboard.html")
    p.add_argument("runs", nargs="+", metavar="RUN_OR_DIR", help="run directories, or folders searched for runs")
    p.add_argument("--baseline", default=None, metavar="RUN",
                   help="run name or directory compared against (default: lowest step of a sweep, else the first run)")
    p.add_argument("--tasks", default=None, help="comma-separated tasks (default: every task of the runs)")
    p.add_argument("--intersect", action="store_true",
                   help="compare runs with different problem sets, data hashes or k on the problems they share")
    p.add_argument("--include-incomplete", action="store_true",
                   help="rank runs that lack samples their run.json declares (default: they are left out and named)")
    p.add_argument("--average", default="task_mean", choices=["task_mean", "problem_weighted"],
                   help="what the average and the ranking use (default task_mean: the mean of task means, the paper's)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the JSON document (schema: analysis/leaderboard.py)")
    out.add_argument("--markdown", action="store_true", help="print Markdown tables")
    out.add_argument("--csv", action="store_true", help="print the runs table as CSV (one row per run)")
    p.add_argument("--html", default=None, metavar="OUT", help="also write one self-contained HTML page (plotly) here")
    p.set_defaults(func=_run_leaderboard)


def _run_leaderboard(args: argparse.Namespace) -> int:
    from analysis.leaderboard_cli import run_leaderboard

    return run_leaderboard(args)
