"""``pr1-eval analyze RUN_OR_ROOT... [--json] [--out DIR] [--embedding-model NAME] [--no-embeddings]``.

The handler. Registration lives in the light :mod:`analysis.command` (the ``pr1_eval.commands``
entry point), so other ``pr1-eval`` commands do not pay for importing pandas and scipy.
``python -m analysis.cli`` runs the same command standalone.

Exit status: 0 when every named run loaded; 1 when some could not be read (the rest are
analysed and each failure is printed with its reason); 2 (via ``Pr1EvalError``) when none could.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.diversity import Embedder
from analysis.figures import write_figures
from analysis.loader import load_runs
from analysis.summary import Analysis, analyze, to_json
from pr1_eval.errors import Pr1EvalError

_STRUCTURE_VIEW = ["run", "task", "step", "n_samples", "parallel_ratio", "blocks_per_response", "paths_per_block",
                   "in_block_share", "first_block_rel_pos", "block_rel_pos", "position_unit", "format_ok_ratio",
                   "accuracy", "accuracy_with_block", "accuracy_without_block"]
_DIVERSITY_VIEW = ["run", "task", "n_pairs", "bleu_mean", "cosine_mean", "n_blocks_roles", "share_verification",
                   "share_exploration", "share_undetermined", "summary_consistency"]
_TREND_VIEW = ["task", "model_family", "decoding", "metric", "n_steps", "spearman_rho", "p_value", "p_value_exact"]


def run_analyze(args: argparse.Namespace) -> int:
    """The ``analyze`` handler (see the module docstring for its exit status)."""
    loaded = load_runs(args.runs)
    for path, reason in loaded.failures:
        print(f"warning: run not loaded: {path}: {reason}", file=sys.stderr)
    if loaded.samples.empty:
        raise Pr1EvalError("no run could be loaded from " + ", ".join(map(str, args.runs)))
    embedder = None if args.no_embeddings else Embedder(args.embedding_model)
    analysis = analyze(loaded, embedder)
    out = Path(args.out)
    document = to_json(analysis)
    written = write_tables(analysis, out)
    figures, figure_notes = write_figures(analysis, out)
    document["notes"].extend(figure_notes)
    (out / "analysis.json").write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        print_tables(analysis, document["notes"])
    print(f"wrote {len(written)} tables, {len(figures)} figures and analysis.json to {out}", file=sys.stderr)
    return 1 if loaded.failures else 0


def write_tables(analysis: Analysis, out_dir: Path) -> list[Path]:
    """Each table as ``<name>.parquet`` and ``<name>.csv`` (list columns as JSON in the CSV)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in analysis.tables().items():
        table.to_parquet(out_dir / f"{name}.parquet", index=False)
        _csv_ready(table).to_csv(out_dir / f"{name}.csv", index=False)
        written.append(out_dir / f"{name}.parquet")
    return written


def _csv_ready(table: pd.DataFrame) -> pd.DataFrame:
    """Lists become JSON text so the CSV stays one value per cell and is parseable."""
    out = table.copy()
    for column in out.columns:
        if out[column].map(lambda v: isinstance(v, (list, tuple))).any():
            out[column] = out[column].map(lambda v: json.dumps(list(v)) if isinstance(v, (list, tuple)) else v)
    return out


def _show(title: str, table: pd.DataFrame, columns: list[str]) -> None:
    print(f"\n== {title} ==")
    view = table[[c for c in columns if c in table]].copy()
    for column in view.columns:
        if str(view[column].dtype) == "Int64":  # pandas prints <NA> there, not na_rep
            view[column] = view[column].map(lambda v: "null" if pd.isna(v) else str(int(v)))
    print(view.to_string(index=False, na_rep="null", float_format=lambda x: f"{x:.4f}"))


def print_tables(analysis: Analysis, notes: Sequence[str]) -> None:
    """The human-readable report: structure, diversity and roles, drift, notes."""
    _show("Structure (per run × task)", analysis.runs, _STRUCTURE_VIEW)
    _show("Path diversity and block roles", analysis.runs, _DIVERSITY_VIEW)
    if not analysis.drift_trends.empty:
        _show("Drift over training (Spearman vs step)", analysis.drift_trends, _TREND_VIEW)
    if notes:
        print("\n== Notes ==")
        for note in notes:
            print(f"- {note}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m analysis.cli analyze ...``: the same command as ``pr1-eval analyze``."""
    from pr1_eval.cli import main as pr1_eval_main

    return pr1_eval_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
