"""``pr1-eval leaderboard``: rank runs (or a sweep's checkpoints) per task, with paired tests.

A plugin of ``pr1-eval`` (the ``pr1_eval.commands`` entry point: ``pr1_eval`` must not import
``analysis``), which builds its parser on every start; so the ranking (pandas, plotly) loads
inside the handler, when ``leaderboard`` runs. The numbers come from
:func:`analysis.leaderboard.board.compute_leaderboard`, laid out by :mod:`analysis.leaderboard.tables`.
``--average``'s choices and the include flag come from :mod:`analysis.common.defaults`, a leaf that
``--help`` can import without pandas.

Exit status: 0 when every named run loaded; 1 when some could not be read (the rest are ranked
and each failure is named); 2 (``Pr1EvalError``) when nothing can be ranked. Runs that are not all comparable are ranked
group by group (:mod:`analysis.leaderboard.groups`), unless ``--intersect`` asked for one ranking.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from analysis.common.defaults import AVERAGES, INCLUDE_FLAG
from pr1_eval.cli.help import add_command
from pr1_eval.cli.sweep_adaptive import DECIDE_TESTS, FRACTION, QUESTIONS
from pr1_eval.report.tracking import add_tracking_options, check_installed, log_runs, vars_for_log
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
    out.add_argument("--json", action="store_true", help="print the JSON document (schema: analysis/leaderboard/board.py)")
    out.add_argument("--markdown", action="store_true", help="print Markdown tables")
    out.add_argument("--csv", action="store_true", help="print the runs table as CSV (one row per run)")
    p.add_argument("--html", default=None, metavar="OUT", help="also write one self-contained HTML page (plotly) here")
    add_tracking_options(p)
    p.add_argument("--until-decided", default=None, choices=QUESTIONS,
                   help="instead of the ranking: whether the samples held decide the best checkpoint (within --delta) "
                        "or every pair's sign or 'within ±delta', with the adaptive sweep's guarantee at every round "
                        "(chance of any wrong verdict ≤ --alpha); undecided pairs print the gap they resolve")
    p.add_argument("--delta", type=FRACTION, default=0.05, metavar="D",
                   help="with --until-decided: resolution, a fraction of problems solved (default 0.05 = 5 points)")
    p.add_argument("--alpha", type=FRACTION, default=0.05, metavar="A",
                   help="with --until-decided: chance of any wrong verdict across the comparisons (default 0.05)")
    p.add_argument("--decide-test", choices=DECIDE_TESTS, default=None,
                   help="with --until-decided: the test (as sweep's --decide-test); default: the one an adaptive "
                        "sweep's record names, else obrien-fleming (one look at what the runs hold: the fixed-k test)")
    p.set_defaults(func=run_leaderboard)


def run_leaderboard(args: argparse.Namespace) -> int:
    """The ``leaderboard`` handler (see the module docstring for its exit status).

    Runs that are not all comparable (a first-hour ``runs/`` folder: different tasks, ``--limit``
    slices, k) are ranked group by group (:mod:`analysis.leaderboard.groups`) instead of refused;
    with ``--intersect`` the user asked for one ranking on the shared problems, so a refusal stays."""
    from analysis.leaderboard.board import LEADERBOARD_COLUMNS, NotComparable, compute_leaderboard
    from analysis.runs.loader import load_runs

    started = time.perf_counter()
    check_installed(getattr(args, "log_to", None))  # before the runs are read
    if getattr(args, "until_decided", None):
        from analysis.leaderboard.decided import until_decided

        if args.html:
            from analysis.leaderboard.page import check_html_target

            check_html_target(args.html)
        print(until_decided(args.runs, args.until_decided, args.delta, args.alpha, args.decide_test,
                            as_json=bool(args.json), html=args.html))
        if args.html:
            print(terminal_text(f"wrote {args.html}"), file=sys.stderr)
        return 0
    if args.html:  # before the runs are read: never over a run's record
        from analysis.leaderboard.page import check_html_target

        check_html_target(args.html)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    include = bool(getattr(args, "include_incomplete", False))
    loaded = load_runs(args.runs, tokenizer=None, columns=LEADERBOARD_COLUMNS, blocks=False)
    try:
        board = compute_leaderboard(loaded, baseline=args.baseline, tasks=tasks, intersect=args.intersect,
                                    average=args.average, include_incomplete=include)
    except NotComparable:
        if args.intersect:
            raise
        return _grouped(args, loaded, tasks, include, started)
    doc = board.document
    _print(args, doc, "csv" if args.csv else "markdown" if args.markdown else "text", grouped=False)
    if args.html:
        from analysis.leaderboard.page import write_leaderboard_html

        path = write_leaderboard_html(board, args.html)
        print(terminal_text(f"wrote {path}"), file=sys.stderr)
    print(f"leaderboard of {len(doc['runs'])} run(s), {len(doc['tasks'])} task(s), {len(doc['comparisons'])} "
          f"comparison(s) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    ranked = sorted(doc["runs"], key=lambda r: (r.get("step") is None, r.get("step") or 0, str(r.get("path"))))
    log_runs(args, [r["path"] for r in ranked], name="leaderboard",
             config={"command": "leaderboard", **vars_for_log(args)})
    return 1 if doc["failures"] else 0


def _print(args: argparse.Namespace, doc: dict[str, Any], fmt: str, grouped: bool) -> None:
    """Failures on stderr, then the document in the asked-for form on stdout."""
    for failure in doc["failures"]:
        print(terminal_text(f"warning: run not loaded: {failure['path']}: {failure['reason']}"), file=sys.stderr)
    if args.json:
        print(terminal_json(doc))
    elif grouped:
        from analysis.leaderboard.groups_render import render_grouped

        print(render_grouped(doc, fmt))
    else:
        from analysis.leaderboard.tables import render

        print(render(doc, fmt))


def _grouped(args: argparse.Namespace, loaded: Any, tasks: list[str] | None, include: bool, started: float) -> int:
    """The leaderboard of runs that are not all comparable: one per group of comparable runs."""
    from analysis.leaderboard.groups import compute_groups

    grouped = compute_groups(loaded, baseline=args.baseline, tasks=tasks, average=args.average,
                             include_incomplete=include)
    doc = grouped.document
    print(terminal_text(f"note: {doc['reason']}"), file=sys.stderr)
    _print(args, doc, "csv" if args.csv else "markdown" if args.markdown else "text", grouped=True)
    if args.html:
        from analysis.leaderboard.groups_render import write_grouped_html

        path = write_grouped_html(grouped, args.html)
        print(terminal_text(f"wrote {path}"), file=sys.stderr)
    print(f"leaderboard of {len(doc['groups'])} group(s) of comparable runs, {len(doc['alone'])} run(s) alone, "
          f"{len(doc['not_ranked'])} not ranked in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 1 if doc["failures"] else 0
