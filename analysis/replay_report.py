"""What ``pr1-eval replay`` runs and prints (:mod:`analysis.replay_command` holds its parser).

Apart from the parser because building ``pr1-eval``'s parser must load no grader, store, pandas or
plotly (every start builds it, ``--help`` too): the command module imports this one inside its
handler.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from analysis.controller_frontier import frontier_figure
from pr1_eval.errors import Pr1EvalError
from pr1_eval.output_paths import check_output_target
from pr1_eval.replay.rows import authors_note, read_authors_csv, replay_row, with_authors
from pr1_eval.replay.sources import load_sources
from pr1_eval.replay.specs import DEFAULT_SPECS, fit_to_branches, parse_spec
from pr1_eval.store.safe_write import atomic_output
from pr1_eval.terminal import terminal_text

COLUMNS = ("task", "controller", "acc", "tokens", "seq_tokens", "branches", "acc_sd_over_seeds", "authors_acc",
           "authors_tokens", "authors_seq_tokens")


def _authors_by_task(paths: list[str] | None, tasks: set[str]) -> dict[str, list[dict[str, str]]]:
    found: dict[str, list[dict[str, str]]] = {}
    for path in paths or []:
        stem = Path(path).stem.removesuffix("_raw")
        task = next((t for t in sorted(tasks, key=len, reverse=True) if stem.endswith(t)), None)
        if task is None:
            raise Pr1EvalError(f"--authors {path}: its name names none of the replayed tasks ({', '.join(sorted(tasks))})")
        found[task] = read_authors_csv(path)
    return found


def replay_command(args: argparse.Namespace) -> int:
    """What ``pr1-eval replay`` does: one row per (source, controller), then the chosen output."""
    if args.html is not None:
        check_output_target(args.html, "--html")  # before any work: the guard every output option goes through
    specs = [parse_spec(s) for s in (args.controller or DEFAULT_SPECS)]
    sources = load_sources(args.sources)
    authors = _authors_by_task(args.authors, {s.task for s in sources})
    seeds = list(range(args.seeds))
    rows = []
    work: list[tuple[Any, Any]] = []
    notes: list[str] = []
    for source in sources:  # a budget above the branches held is refused (chosen) or fitted and stated (default)
        fitted, said = fit_to_branches(specs, min(len(q.branches) for q in source.questions), source.label,
                                       chosen=bool(args.controller))
        work += [(source, spec) for spec in fitted]
        notes += said
    for source, spec in tqdm(work, desc="replay", unit="controller", disable=None, file=sys.stderr):
        row = replay_row(source, spec, seeds, args.match)
        rows.append(with_authors(row, spec, authors[source.task]) if source.task in authors else row)
        if source.task in authors and (why := authors_note(spec, authors[source.task], source.task)):
            notes.append(why)
    if args.json:
        print(json.dumps([r.to_json() for r in rows], indent=2))
    elif args.csv:
        print(_csv_text(rows), end="")
    else:
        print(_table(rows, args))
    for note in notes:
        print(terminal_text(note), file=sys.stderr)
    if args.html is not None:
        _write_html(rows, args.html)
    return 0


def _csv_text(rows: list[Any]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["source", "model", *COLUMNS])
    for r in rows:
        data = r.to_json()
        writer.writerow([terminal_text(str(data["source"])), terminal_text(str(data["model"])),
                         *(data[c] for c in COLUMNS)])
    return buffer.getvalue()


def _table(rows: list[Any], args: argparse.Namespace) -> str:
    frame = pd.DataFrame([{c: r.to_json()[c] for c in COLUMNS} for r in rows])
    frame["tokens"] = frame["tokens"].map(lambda v: f"{int(v):,}")  # truncated, as the authors print them
    frame["seq_tokens"] = frame["seq_tokens"].map(lambda v: f"{int(v):,}")
    frame["branches"] = frame["branches"].map(lambda v: f"{v:.1f}")
    has_authors = frame["authors_acc"].notna().any()
    for c in ("authors_acc", "authors_tokens", "authors_seq_tokens"):
        if not has_authors:
            frame = frame.drop(columns=c)
        else:
            frame[c] = frame[c].map(lambda v: "—" if pd.isna(v) else f"{v:,.2f}".rstrip("0").rstrip("."))
    frame = frame.rename(columns={"acc": "acc %", "tokens": "tokens/question", "seq_tokens": "sequential",
                                  "branches": "branches read", "acc_sd_over_seeds": "sd over seeds",
                                  "authors_acc": "authors acc %", "authors_tokens": "authors tokens",
                                  "authors_seq_tokens": "authors sequential"})
    first = rows[0]
    lines = [*(terminal_text(line) for line in frame.to_string(index=False).splitlines()), "",
             f"means over {first.seeds} seeded branch orders (seeds 0-{first.seeds - 1}) of per-question figures; "
             f"correct = {'answer string equals the gold (the authors)' if first.match == 'exact' else 'pr1-eval grader'}"
             "; tokens as the authors count them (a probe costs its whole interval)"]
    return "\n".join(lines)


def _write_html(rows: list[Any], target: str) -> None:
    html = frontier_figure(rows).to_html(include_plotlyjs=True, full_html=True).encode("utf-8")
    with atomic_output(target, need_bytes=len(html)) as handle:
        handle.write(html)
    print(f"wrote {terminal_text(target)}", file=sys.stderr)
