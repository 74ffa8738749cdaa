"""What ``pr1-eval replay`` runs and prints (:mod:`analysis.efficiency.replay_command` holds its parser).

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
import textwrap
import time
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from analysis.efficiency.frontier import frontier_figure
from pr1_eval.errors import Pr1EvalError
from pr1_eval.output_paths import check_output_target
from pr1_eval.replay.rows import agreement, authors_name, authors_note, read_authors_csv, replay_row, with_authors
from pr1_eval.replay.sources import load_sources
from pr1_eval.replay.specs import DEFAULT_SPECS, fit_to_branches, parse_spec
from pr1_eval.store.safe_write import atomic_output
from pr1_eval.terminal import terminal_text

COLUMNS = ("task", "controller", "acc", "tokens", "seq_tokens", "branches", "acc_sd_over_seeds", "authors_acc",
           "authors_tokens", "authors_seq_tokens", "vs_authors", "authors_row")
#: Off a terminal, a progress line at most this often (seconds), and one when the replay ends.
LINE_EVERY_S = 2.0


def _authors_by_task(paths: list[str] | None, tasks: set[str]) -> dict[str, list[dict[str, str]]]:
    found: dict[str, list[dict[str, str]]] = {}
    for path in paths or []:
        stem = Path(path).stem.removesuffix("_raw")
        task = next((t for t in sorted(tasks, key=len, reverse=True) if stem.endswith(t)), None)
        if task is None:
            raise Pr1EvalError(f"--authors {path}: its name names none of the replayed tasks ({', '.join(sorted(tasks))})")
        found[task] = read_authors_csv(path)
    return found


class _Progress:
    """Where a replay is: a bar on a terminal; off one (a log, a pipe), a ``[pr1-eval]`` line at
    most every :data:`LINE_EVERY_S` seconds naming the row just done, and a closing line. Why: a
    three-task replay printed nothing until its table, which off a terminal (tqdm's
    ``disable=None``) read as a hang."""

    def __init__(self, total: int, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.total, self.done, self.start = total, 0, time.monotonic()
        self.last_line = self.start
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.bar = tqdm(total=total, desc="replay", unit="row", file=self.stream) if tty else None

    def advance(self, what: str) -> None:
        self.done += 1
        now = time.monotonic()
        if self.bar is not None:
            self.bar.set_postfix_str(what, refresh=False)
            self.bar.update(1)
        elif now - self.last_line >= LINE_EVERY_S and self.done < self.total:
            self.last_line = now
            rate = (now - self.start) / self.done
            print(f"[pr1-eval] replay {self.done}/{self.total} rows ({what} done), {now - self.start:.0f}s, "
                  f"about {rate * (self.total - self.done):.0f}s left", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        print(f"[pr1-eval] replayed {self.total} row(s) in {time.monotonic() - self.start:.1f}s",
              file=self.stream, flush=True)


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
    progress = _Progress(len(work))
    for source, spec in work:
        row = replay_row(source, spec, seeds, args.match)
        rows.append(with_authors(row, spec, authors[source.task]) if source.task in authors else row)
        if source.task in authors and (why := authors_note(spec, authors[source.task], source.task)):
            notes.append(why)
        progress.advance(f"{source.task} {spec.text}")
    progress.close()
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
    """Ours and, with ``--authors``, theirs in the same format (acc to 0.01, tokens truncated
    with thousands separators, as the authors print them), a ``vs authors`` column that says
    ``equal`` or ``differs`` (the differences under the table, so it fits 120 columns), and below
    the table the authors' name of each controller."""
    frame = pd.DataFrame([{c: r.to_json()[c] for c in COLUMNS} for r in rows])
    has_authors = frame["authors_acc"].notna().any()
    for c in ("tokens", "seq_tokens", "authors_tokens", "authors_seq_tokens"):
        frame[c] = frame[c].map(lambda v: "—" if pd.isna(v) else f"{int(v):,}")  # truncated, as the authors print them
    for c in ("acc", "authors_acc"):
        frame[c] = frame[c].map(lambda v: "—" if pd.isna(v) else f"{v:.2f}")
    frame["branches"] = frame["branches"].map(lambda v: f"{v:.1f}")
    frame["vs_authors"] = frame["vs_authors"].map(
        lambda v: "—" if v is None or pd.isna(v) else v if v == "equal" else "differs")  # how, under the table
    frame = frame.drop(columns=["authors_row"])
    if not has_authors:
        frame = frame.drop(columns=["authors_acc", "authors_tokens", "authors_seq_tokens", "vs_authors"])
    frame = frame.rename(columns={"acc": "acc %", "tokens": "tokens", "seq_tokens": "sequential",
                                  "branches": "branches", "acc_sd_over_seeds": "sd seeds",
                                  "authors_acc": "their acc %", "authors_tokens": "their tokens",
                                  "authors_seq_tokens": "their seq.", "vs_authors": "vs authors"})
    first = rows[0]
    notes = []
    if has_authors:
        compared = [agreement(r) for r in rows if agreement(r) is not None]
        missing = len(rows) - len(compared)
        notes.append(f"vs authors: {sum(a == 'equal' for a in compared)} of {len(compared)} compared rows equal the "
                     "authors' (acc to their 0.01, tokens after their int())"
                     + (f"; {missing} row(s) marked — have no row in the authors' CSV" if missing else ""))
        notes.extend(f"{r.task} {r.controller} differs from the authors: {agreement(r)}" for r in rows
                     if agreement(r) not in (None, "equal"))
    names = {spec_name(r.controller): authors_name(spec_name(r.controller)) for r in rows}
    known = [f"{name} = {theirs}" for name, theirs in names.items() if theirs]
    if known:
        notes.append("the authors' names (Solver/Strategy): " + "; ".join(known))
    notes.append(f"means over {first.seeds} seeded branch orders (seeds 0-{first.seeds - 1}) of per-question figures: "
                 "tokens per question (all branches), sequential tokens (the longest chain), branches read, the "
                 "accuracy's standard deviation over seeds; "
                 f"correct = {'answer string equals the gold (the authors)' if first.match == 'exact' else 'pr1-eval grader'}"
                 "; tokens as the authors count them (a probe costs its whole interval)"
                 + ("; their = the authors' published figures" if has_authors else ""))
    table = [terminal_text(line) for line in frame.to_string(index=False).splitlines()]
    return "\n".join([*table, "", *(line for note in notes for line in textwrap.wrap(note, 120))])


def spec_name(text: str) -> str:
    """``probe@64:stable=10`` -> ``probe``."""
    return text.partition(":")[0].partition("@")[0]


def _write_html(rows: list[Any], target: str) -> None:
    html = frontier_figure(rows).to_html(include_plotlyjs=True, full_html=True).encode("utf-8")
    with atomic_output(target, need_bytes=len(html)) as handle:
        handle.write(html)
    print(f"wrote {terminal_text(target)}", file=sys.stderr)
