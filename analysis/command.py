"""``pr1-eval analyze``: what the models do when they think in parallel, over one or many runs.

A plugin of ``pr1-eval`` (the ``pr1_eval.commands`` entry point: ``pr1_eval`` must not import
``analysis``), which builds its parser on every start; so this module imports only light leaves
at the top, and the analysis stack (pandas, scipy, sentence-transformers) loads inside the
handler, when ``analyze`` runs, and not at all when :mod:`analysis.engine.outputs` holds this exact
analysis (same runs, files, code and options): its files are then copied to ``--out`` and its
document printed. What it writes and prints: :mod:`analysis.pipeline.output`.

Exit status: 0 when every named run loaded; 1 when some could not be read (the rest are
analysed and each failure is printed with its reason); 2 (via ``Pr1EvalError``) when none could.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import sys
import threading
from pathlib import Path
from typing import Any

from analysis.common.defaults import DEFAULT_EMBEDDING_MODEL, DEFAULT_OUT, INCLUDE_FLAG
from analysis.engine import outputs as output_cache
from analysis.engine.collector import collector_off
from analysis.engine.outputs import Entry
from analysis.engine.workers import Workers, analysis_workers, forks_workers
from analysis.pipeline.output_folder import check_replace, default_out, write_marker
from pr1_eval.cli.help import add_command
from pr1_eval.errors import Pr1EvalError
from pr1_eval.output_paths import check_output_target
from pr1_eval.terminal import terminal_json, terminal_text

SUMMARY = "behaviour analysis: parallel ratio, block positions, drift, diversity, roles"
DESCRIPTION = ("What the models do when they think in parallel, over one or many runs: how often they branch "
               "(parallel ratio), where in the response the blocks sit and how that drifts over training steps, "
               "how different the paths of a block are (BLEU, embedding cosine), and whether a block explores or "
               "verifies. Prints tables and writes them (parquet, CSV), HTML figures and analysis.json to --out.")
EXAMPLES = "  pr1-eval analyze runs/\n  pr1-eval analyze runs/step100 runs/step200 --json --no-embeddings"


def register(subparsers: Any) -> None:
    """Add ``analyze`` to an argparse subparsers object (the ``pr1_eval.commands`` hook)."""
    p = add_command(subparsers, "analyze", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("runs", nargs="+", metavar="RUN_OR_ROOT", help="run directories, or folders searched for runs")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of tables")
    p.add_argument("--out", default=None, metavar="DIR",
                   help=f"where tables (parquet + CSV), figures (HTML) and analysis.json go (default "
                        f"./{DEFAULT_OUT}/NAME, NAME from the inputs: runs/ -> {DEFAULT_OUT}/runs)")
    p.add_argument("--force", action="store_true",
                   help="replace the analysis of other inputs that --out holds (refused without it)")
    p.add_argument("--embedding-model", default=DEFAULT_EMBEDDING_MODEL, metavar="NAME",
                   help="sentence-transformers model name or folder (default: bundled all-MiniLM-L6-v2, offline)")
    p.add_argument("--no-embeddings", action="store_true", help="skip embedding cosine (it is then null)")
    p.add_argument(INCLUDE_FLAG, action="store_true",
                   help="let runs and tasks that lack samples their run.json declares into the drift trends "
                        "(they are always shown, marked incomplete)")
    p.set_defaults(func=run_analyze)


def run_analyze(args: argparse.Namespace) -> int:
    """The ``analyze`` handler (see the module docstring for its exit status). An analysis of
    unchanged runs is answered from :mod:`analysis.engine.outputs` without loading anything."""
    out = Path(args.out) if args.out is not None else default_out(list(map(str, args.runs)))
    check_output_target(out, "--out", folder=True)  # before any work: a file in the way, a read-only disk
    check_replace(out, list(map(str, args.runs)), bool(getattr(args, "force", False)))
    include = bool(getattr(args, "include_incomplete", False))
    key = None
    if args.no_embeddings:
        key = output_cache.inputs_key(list(map(str, args.runs)), {"include_incomplete": include}, out)
        if (hit := output_cache.lookup(key)) is not None:
            output_cache.restore(*hit, out)
            for warning in hit[1].warnings:
                print(terminal_text(warning), file=sys.stderr)
            write_marker(out, list(map(str, args.runs)))
            return _finish(hit[1], bool(args.json), out)
    entry, files = _analyze(args, out, include)
    write_marker(out, list(map(str, args.runs)))
    if key is not None:
        output_cache.store(key, out, files, entry)
    return _finish(entry, bool(args.json), out)


def _finish(entry: Entry, as_json: bool, out: Path) -> int:
    """Print what an analysis prints once its files are written: the document or the tables, then
    the summary line; the exit status."""
    if as_json:
        print(terminal_json(entry.document))
    else:
        sys.stdout.write(entry.tables_text)
    print(terminal_text(f"{entry.summary} {out}"), file=sys.stderr)
    return int(entry.status)


def _analyze(args: argparse.Namespace, out: Path, include: bool) -> tuple[Entry, list[Path]]:
    """Run the analysis, write its files to ``out``; the :class:`analysis.engine.outputs.Entry` and the files."""
    from analysis.pipeline.early_grading import start_grading_now, use_cold_grading_workers  # the grader: not at --help

    use_cold_grading_workers()
    start_grading_now(list(map(str, args.runs)), forks_workers())
    import analysis.pipeline.output  # noqa: F401 - with the analysis stack: imported before the fork, workers have it

    with collector_off(), analysis_workers() as workers:  # forked now, before anything below starts a thread
        _import_in_background(_LATE_MODULES)
        return _analyze_with(args, out, include, workers)


#: What an analysis needs only at its end, imported meanwhile (see :func:`_import_in_background`).
_LATE_MODULES = ("analysis.pipeline.figures", "scipy.special")


def _import_in_background(names: tuple[str, ...]) -> None:
    """Import ``names`` on a daemon thread. Why: plotly (the figures) and scipy.special (the drift
    p-values' t tail) take over a second to import and are needed only once every table is built,
    after the workers are done, when this process alone works; imported while the runs load,
    that time overlaps the workers' parse. The workers do not need them, so this starts after the
    fork (a thread must not hold the import lock when a process forks). A later import of one of
    them waits for this one to finish; a failure here leaves it to that import to raise."""
    def run() -> None:
        for name in names:
            with contextlib.suppress(Exception):
                importlib.import_module(name)

    threading.Thread(target=run, name="pr1-analysis-imports", daemon=True).start()


def _analyze_with(args: argparse.Namespace, out: Path, include: bool, workers: Workers | None
                  ) -> tuple[Entry, list[Path]]:
    """:func:`_analyze` with its worker processes (``None``: everything in this one)."""
    from analysis.pipeline.figures import PLOTLY_JS, write_figures
    from analysis.pipeline.output import CsvBegun, group_notes, print_tables, write_document, write_tables
    from analysis.pipeline.scheduled import Embedder
    from analysis.runs.loader import load_runs
    from analysis.summary import ANALYSIS_COLUMNS, analyze, to_json

    loaded = load_runs(args.runs, columns=ANALYSIS_COLUMNS, workers=workers)
    warnings = [f"warning: run not loaded: {path}: {reason}" for path, reason in loaded.failures]
    for warning in warnings:
        print(terminal_text(warning), file=sys.stderr)
    if loaded.samples.empty:
        raise Pr1EvalError("no run could be loaded from " + ", ".join(map(str, args.runs)))
    embedder = None if args.no_embeddings else Embedder(args.embedding_model)
    begun = CsvBegun(workers, out)  # the big tables' CSV is made in the workers as each is ready
    try:
        analysis = analyze(loaded, embedder, include_incomplete=include, workers=workers, on_table=begun.begin)
        document = to_json(analysis)
        # the figures first: this process draws them while the workers still make the big tables' CSV
        figures, figure_notes = write_figures(analysis, out)
        written = write_tables(analysis, out, workers, begun)
    finally:
        begun.close()
    document["notes"] = group_notes([*document["notes"], *figure_notes], len(analysis.runs),
                                    runs=[str(r) for r in analysis.runs["run"].unique()] if not analysis.runs.empty else [])
    write_document(out / "analysis.json", document)
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        print_tables(analysis, document["notes"])
    files = [*written, *(p.with_suffix(".csv") for p in written), *figures, out / "analysis.json"]
    if figures:
        files.append(out / PLOTLY_JS)
    entry = Entry(files=[p.name for p in files], document=document, tables_text=text.getvalue(), warnings=warnings,
                  summary=f"wrote {len(written)} tables, {len(figures)} figures and analysis.json to",
                  status=1 if loaded.failures else 0)
    return entry, files
