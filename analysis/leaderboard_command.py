"""``pr1-eval leaderboard``: rank runs (or a sweep's checkpoints) per task, with paired tests.

A plugin of ``pr1-eval`` (the ``pr1_eval.commands`` entry point: ``pr1_eval`` must not import
``analysis``), which builds its parser on every start; so the ranking (pandas, plotly) loads
inside the handler, when ``leaderboard`` runs. The numbers come from
:func:`analysis.leaderboard.compute_leaderboard`, laid out by :mod:`analysis.leaderboard_tables`.
``--average``'s choices and the include flag come from :mod:`analysis.defaults`, a leaf that
``--help`` can import without pandas.

Exit status: 0 when every named run loaded; 1 when some could not be read (the rest are ranked
and each failure is named); 2 (``Pr1EvalError``) when the runs cannot be compared.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from analysis.defaults import AVERAGES, INCLUDE_FLAG
from pr1_eval.cli.help import add_command
from pr1_eval.terminal import terminal_json, terminal_text

SUMMARY = "rank runs/checkpoints per task with paired tests of which differences are real"
DESCRIPTION = ("Rank runs (or the checkpoints of a sweep): one row per run with mean@K and its 95% interval, "
               "pass@K, best@K_paper, maj@K and parallel ratio per task and averaged. Rows not significantly "
               "below the row above are marked tied; every run is compared with a baseline on the problems "
               "they share (paired bootstrap, sign-flip test, Holm correction).")
EXAMPLES = ("  pr1-eval leaderboard runs/\n  pr1-eval leaderboard runs/ --baseline runs/base --markdown\n"
            "  pr1-eval leaderboard runs/ --html leaderboard.html")


def register(subparsers: Any) -> None:
    """Add ``leaderboard`` to an argparse subparsers object (the ``pr1_eval.commands`` hook)."""
    p = add_command(subparsers, "leaderboard", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("runs", nargs="+", metavar="RUN_OR_DIR", help="run directories, or folders searched for runs")
    p.add_argument("--baseline", default=None, metavar="RUN",
                   help="run name or directory compared against (default: lowest step of a sweep, else the first run)")
    p.add_argument("--tasks", default=None, help="comma-separated tasks (default: every task of the runs)")
    p.add_argument("--intersect", action="store_true",
                   help="compare runs with different problem sets, data hashes or k on the problems they share")
    p.add_argument(INCLUDE_FLAG, action="store_true",
                   help="rank runs that lack samples their run.json declares (default: they are left out and named)")
    p.add_argument("--average", default=AVERAGES[0], choices=AVERAGES,
                   help="what the average and the ranking use (default task_mean: the mean of task means, the paper's)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the JSON document (schema: analysis/leaderboard.py)")
    out.add_argument("--markdown", action="store_true", help="print Markdown tables")
    out.add_argument("--csv", action="store_true", help="print the runs table as CSV (one row per run)")
    p.add_argument("--html", default=None, metavar="OUT", help="also write one self-contained HTML page (plotly) here")
    p.add_argument("--until-decided", default=None, choices=("best", "ranking"),
                   help="instead of the ranking: whether the samples held decide the best checkpoint (within --delta) "
                        "or every pair's sign or 'within ±delta', with the adaptive sweep's anytime-valid guarantee "
                        "(chance of any wrong verdict ≤ --alpha); undecided pairs print the gap they resolve")
    p.add_argument("--delta", type=float, default=0.05, metavar="D",
                   help="with --until-decided: resolution, a fraction of problems solved (default 0.05 = 5 points)")
    p.add_argument("--alpha", type=float, default=0.05, metavar="A",
                   help="with --until-decided: chance of any wrong verdict across the comparisons (default 0.05)")
    p.set_defaults(func=run_leaderboard)


def run_leaderboard(args: argparse.Namespace) -> int:
    """The ``leaderboard`` handler (see the module docstring for its exit status)."""
    from analysis.leaderboard import Leaderboard, compute_leaderboard
    from analysis.leaderboard_tables import render

    started = time.perf_counter()
    if getattr(args, "until_decided", None):
        from analysis.leaderboard_decided import until_decided

        print(until_decided(args.runs, args.until_decided, args.delta, args.alpha))
        return 0
    if args.html:  # before the runs are read: never over a run's record
        from analysis.leaderboard_html import check_html_target

        check_html_target(args.html)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    board: Leaderboard = compute_leaderboard(args.runs, baseline=args.baseline, tasks=tasks, intersect=args.intersect,
                                             average=args.average,
                                             include_incomplete=bool(getattr(args, "include_incomplete", False)))
    doc = board.document
    for failure in doc["failures"]:
        print(terminal_text(f"warning: run not loaded: {failure['path']}: {failure['reason']}"), file=sys.stderr)
    if args.json:
        print(terminal_json(doc))
    else:
        print(render(doc, "markdown" if args.markdown else "csv" if args.csv else "text"))
    if args.html:
        from analysis.leaderboard_html import write_leaderboard_html

        path = write_leaderboard_html(board, args.html)
        print(terminal_text(f"wrote {path}"), file=sys.stderr)
    print(f"leaderboard of {len(doc['runs'])} run(s), {len(doc['tasks'])} task(s), {len(doc['comparisons'])} "
          f"comparison(s) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 1 if doc["failures"] else 0
