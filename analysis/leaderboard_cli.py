"""``pr1-eval leaderboard RUN_OR_DIR... [--baseline RUN] [--tasks …] [--intersect] [--json|--markdown|--csv] [--html OUT]``.

The handler; registration lives in the light :mod:`analysis.leaderboard_command`. The numbers
come from :func:`analysis.leaderboard.compute_leaderboard` and are laid out by
:mod:`analysis.leaderboard_tables` (the ranking, per-task and paired-comparison tables and notes).

Exit status: 0 when every named run loaded; 1 when some could not be read (the rest are ranked
and each failure is named); 2 (``Pr1EvalError``) when the runs cannot be compared.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from analysis.leaderboard import Leaderboard, compute_leaderboard
from analysis.leaderboard_tables import render


def run_leaderboard(args: argparse.Namespace) -> int:
    """The ``leaderboard`` handler (see the module docstring for its exit status)."""
    started = time.perf_counter()
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    board: Leaderboard = compute_leaderboard(args.runs, baseline=args.baseline, tasks=tasks, intersect=args.intersect,
                                             average=args.average,
                                             include_incomplete=bool(getattr(args, "include_incomplete", False)))
    doc = board.document
    for failure in doc["failures"]:
        print(f"warning: run not loaded: {failure['path']}: {failure['reason']}", file=sys.stderr)
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        print(render(doc, "markdown" if args.markdown else "csv" if args.csv else "text"))
    if args.html:
        from analysis.leaderboard_html import write_leaderboard_html

        path = write_leaderboard_html(board, args.html)
        print(f"wrote {path}", file=sys.stderr)
    print(f"leaderboard of {len(doc['runs'])} run(s), {len(doc['tasks'])} task(s), {len(doc['comparisons'])} "
          f"comparison(s) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 1 if doc["failures"] else 0
