"""Registers ``pr1-eval analyze`` without importing the analysis stack.

``pr1_eval`` must not import ``analysis``; this module is exposed through the
``pr1_eval.commands`` entry-point group instead, and ``pr1-eval`` calls :func:`register` on every
start. It therefore imports nothing heavy: the handler in :mod:`analysis.cli` (pandas, scipy,
sentence-transformers) loads only when ``analyze`` actually runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from analysis.defaults import DEFAULT_EMBEDDING_MODEL, DEFAULT_OUT


def register(subparsers: Any) -> None:
    """Add ``analyze`` to an argparse subparsers object (the ``pr1_eval.commands`` hook)."""
    p = subparsers.add_parser(
        "analyze", help="behaviour analysis: parallel ratio, block positions, drift, diversity, roles",
        description="What the models do when they think in parallel, over one or many runs: how often they "
                    "branch (parallel ratio), where in the response the blocks sit and how that drifts over "
                    "training steps, how different the paths of a block are (BLEU, embedding cosine), and "
                    "whether a block explores or verifies. Prints tables and writes them (parquet, CSV), "
                    "HTML figures and analysis.json to --out.",
        epilog="examples:\n  pr1-eval analyze runs/\n  pr1-eval analyze runs/step100 runs/step200 --json --no-embeddings")
    p.add_argument("runs", nargs="+", metavar="RUN_OR_ROOT", help="run directories, or folders searched for runs")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of tables")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                   help=f"where tables (parquet + CSV), figures (HTML) and analysis.json go (default ./{DEFAULT_OUT})")
    p.add_argument("--embedding-model", default=DEFAULT_EMBEDDING_MODEL, metavar="NAME",
                   help="sentence-transformers model name or folder (default: bundled all-MiniLM-L6-v2, offline)")
    p.add_argument("--no-embeddings", action="store_true", help="skip embedding cosine (it is then null)")
    p.add_argument("--include-incomplete", action="store_true",
                   help="let runs and tasks that lack samples their run.json declares into the drift trends "
                        "(they are always shown, marked incomplete)")
    p.set_defaults(func=_run_analyze)


def _run_analyze(args: argparse.Namespace) -> int:
    from analysis.cli import run_analyze

    return run_analyze(args)
