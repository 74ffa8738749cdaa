"""``pr1-eval dashboard``: serve a Streamlit dashboard of the runs.

A plugin of ``pr1-eval`` (the ``pr1_eval.commands`` entry point: ``pr1_eval`` must not import
``dashboards``), which builds its parser on every start; so Streamlit and the analysis stack load
only when ``dashboard`` runs. Starting and stopping the Streamlit server is
:mod:`dashboards.launch`'s work; this module holds the command's parser and handler.
"""

from __future__ import annotations

import argparse
from typing import Any

from pr1_eval.cli.help import add_command
from pr1_eval.cli.numbers import float_in, int_in

DEFAULT_RUNS = "runs"
DEFAULT_PORT = 8501
DEFAULT_HOST = "127.0.0.1"
SUMMARY = "explore runs, training steps and traces in the browser (Streamlit)"
DESCRIPTION = ("Serve a Streamlit dashboard of the runs: the leaderboard, training dynamics over steps, "
               "behaviour (parallel ratio, block positions), path diversity and roles, a run-against-run "
               "comparison, and every trace with its blocks. Open the printed address in a browser; "
               "Ctrl-C stops it.")
EXAMPLES = (f"  pr1-eval dashboard            # the runs under ./{DEFAULT_RUNS}\n"
            "  pr1-eval dashboard runs/sweep --port 8600\n"
            "  pr1-eval dashboard --follow runs/job   # new steps show as they land")
#: Seconds between scans of a followed folder (a new step shows within this plus its own read).
DEFAULT_POLL_S = 30.0


def register(subparsers: Any) -> None:
    """Add ``dashboard`` to an argparse subparsers object (the ``pr1_eval.commands`` hook)."""
    p = add_command(subparsers, "dashboard", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("runs", nargs="*", metavar="RUNS_DIR_OR_RUN",
                   help=f"run directories, or folders searched for runs (default ./{DEFAULT_RUNS})")
    p.add_argument("--port", type=int_in(1, 65535), default=DEFAULT_PORT, help=f"port to serve on (default {DEFAULT_PORT})")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to bind (default {DEFAULT_HOST}: this machine only; 0.0.0.0 exposes every response "
                        "to the network)")
    p.add_argument("--follow", action="append", default=[], metavar="DIR",
                   help="a folder a running job (or `import-verl --follow`) writes runs into: served like RUNS, "
                        "and scanned every --poll seconds, so new steps show without a restart; it may be empty "
                        "at first")
    p.add_argument("--poll", type=float_in(0.0, low_open=True), default=DEFAULT_POLL_S, metavar="SECONDS",
                   help=f"seconds between scans of the --follow folders (default {DEFAULT_POLL_S:g})")
    p.set_defaults(func=_run_dashboard)


def _run_dashboard(args: argparse.Namespace) -> int:
    """The ``dashboard`` handler: serve until Ctrl-C (:func:`dashboards.launch.run_dashboard`)."""
    from dashboards.launch import run_dashboard

    runs = [*args.runs, *args.follow] or [DEFAULT_RUNS]
    return run_dashboard(runs, host=args.host, port=args.port, follow=args.poll if args.follow else None,
                         follow_dirs=list(args.follow))
