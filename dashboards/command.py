"""Registers ``pr1-eval dashboard`` without importing Streamlit or the analysis stack.

``pr1-eval`` calls :func:`register` on every start (the ``pr1_eval.commands`` entry point), so
this module imports nothing heavy; :mod:`dashboards.launch` loads only when ``dashboard`` runs.
"""

from __future__ import annotations

import argparse
from typing import Any

DEFAULT_RUNS = "runs"
DEFAULT_PORT = 8501
DEFAULT_HOST = "127.0.0.1"


def register(subparsers: Any) -> None:
    """Add ``dashboard`` to an argparse subparsers object (the ``pr1_eval.commands`` hook)."""
    p = subparsers.add_parser(
        "dashboard", help="explore runs, training steps and traces in the browser (Streamlit)",
        description="Serve a Streamlit dashboard of the runs: the leaderboard, training dynamics over steps, "
                    "behaviour (parallel ratio, block positions), path diversity and roles, a run-against-run "
                    "comparison, and every trace with its blocks. Open the printed address in a browser; "
                    "Ctrl-C stops it.",
        epilog="examples:\n  pr1-eval dashboard            # the runs under ./runs\n"
               "  pr1-eval dashboard runs/sweep --port 8600")
    p.add_argument("runs", nargs="*", metavar="RUNS_DIR_OR_RUN",
                   help=f"run directories, or folders searched for runs (default ./{DEFAULT_RUNS})")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to serve on (default {DEFAULT_PORT})")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to bind (default {DEFAULT_HOST}: this machine only; 0.0.0.0 exposes every response "
                        "to the network)")
    p.set_defaults(func=_run_dashboard)


def _run_dashboard(args: argparse.Namespace) -> int:
    from dashboards.launch import run_dashboard

    return run_dashboard(args.runs or [DEFAULT_RUNS], host=args.host, port=args.port)
