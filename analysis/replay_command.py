"""``pr1-eval replay``: test-time controllers replayed offline on recorded branches.

Why offline: a controller (self-consistency, ESC, ASC, Parallel-Probe) decides how many branches
to read and how far; with every branch's probe answers and token count recorded, its accuracy and
cost follow without generating a token, so controllers are compared on the same samples in
seconds. The rules and the protocol (seeded branch orders, token accounting) are the Parallel-Probe
authors' (:mod:`pr1_eval.replay`); ``--authors`` prints their published figures beside ours.

A plugin of ``pr1-eval`` (entry point ``pr1_eval.commands``) because the frontier figure
(``--html``) is drawn by :mod:`analysis.controller_frontier`; the replay itself is ``pr1_eval``'s.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

from pr1_eval.cli.help import add_command
from pr1_eval.errors import Pr1EvalError
from pr1_eval.replay.rows import read_authors_csv, replay_row, with_authors
from pr1_eval.replay.sources import load_sources
from pr1_eval.replay.specs import DEFAULT_SPECS, parse_spec
from pr1_eval.store.safe_write import atomic_output
from pr1_eval.terminal import terminal_text

SUMMARY = "replay test-time controllers (SC, ESC, ASC, Parallel-Probe) offline on recorded branches"
DESCRIPTION = ("Replay test-time controllers on recorded branches (an imported Parallel-Probe run, or its "
               "trajectory file): accuracy, tokens per question and sequential tokens, averaged over seeded "
               "branch orders (seeds 0-99, the authors' protocol). Without --controller it prints the rows of "
               "the Parallel-Probe authors' table: sc@64, esc@64, asc@64, sac, sc+sac@64, probe@64, probe-all@64.")
EXAMPLES = ("  pr1-eval replay runs/q8b-aime24\n"
            "  pr1-eval replay Qwen3-8B-128__aime24.json --authors AUTHORS_RAW.csv\n"
            "  pr1-eval replay runs/q8b --controller sc@16 --controller probe@16:stable=10\n"
            "  pr1-eval replay runs/q8b --match grader --html frontier.html")
COLUMNS = ("task", "controller", "acc", "tokens", "seq_tokens", "branches", "acc_sd_over_seeds", "authors_acc",
           "authors_tokens", "authors_seq_tokens")


def register(subparsers: Any) -> None:
    """Add ``replay`` to an argparse subparsers object (the ``pr1_eval.commands`` hook)."""
    p = add_command(subparsers, "replay", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("sources", nargs="+", metavar="RUN_OR_FILE",
                   help="an imported probed run (pr1-eval import --format parallel-probe) or a trajectory file")
    p.add_argument("--controller", action="append", default=None, metavar="SPEC",
                   help="NAME@N[:key=value,...], repeatable: sc, esc (window), asc (threshold), sac and sc+sac "
                        "(patience, warmup_steps, burst), probe and probe-all (stable, patience, warm_up, burst, "
                        "max_steps) (default: the authors' seven rows)")
    p.add_argument("--seeds", type=_positive, default=100, metavar="N",
                   help="branch orders to average over: seeds 0..N-1 (default: 100, the authors')")
    p.add_argument("--match", choices=("exact", "grader"), default="exact",
                   help="exact: the answer string equals the gold (the authors'); grader: pr1-eval's grader")
    p.add_argument("--authors", action="append", default=None, metavar="CSV",
                   help="an authors' *_raw.csv; its figures print beside ours (repeat one per task; matched by the "
                        "task in the file name)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the rows as JSON")
    out.add_argument("--csv", action="store_true", help="print the rows as CSV")
    p.add_argument("--html", default=None, metavar="OUT", help="also write the accuracy-against-tokens figure here")
    p.set_defaults(func=run_replay)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"{value} is outside 1..10000")
    return value


def _authors_by_task(paths: list[str] | None, tasks: set[str]) -> dict[str, list[dict[str, str]]]:
    found: dict[str, list[dict[str, str]]] = {}
    for path in paths or []:
        stem = Path(path).stem.removesuffix("_raw")
        task = next((t for t in sorted(tasks, key=len, reverse=True) if stem.endswith(t)), None)
        if task is None:
            raise Pr1EvalError(f"--authors {path}: its name names none of the replayed tasks ({', '.join(sorted(tasks))})")
        found[task] = read_authors_csv(path)
    return found


def run_replay(args: argparse.Namespace) -> int:
    """The ``replay`` handler: one row per (source, controller), then the chosen output."""
    from tqdm import tqdm

    specs = [parse_spec(s) for s in (args.controller or DEFAULT_SPECS)]
    sources = load_sources(args.sources)
    authors = _authors_by_task(args.authors, {s.task for s in sources})
    seeds = list(range(args.seeds))
    rows = []
    work = [(source, spec) for source in sources for spec in specs]
    for source, spec in tqdm(work, desc="replay", unit="controller", disable=None, file=sys.stderr):
        row = replay_row(source, spec, seeds, args.match)
        rows.append(with_authors(row, spec, authors[source.task]) if source.task in authors else row)
    if args.json:
        print(json.dumps([r.to_json() for r in rows], indent=2))
    elif args.csv:
        print(_csv_text(rows), end="")
    else:
        print(_table(rows, args))
    if args.html:
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
    import pandas as pd

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
    from analysis.controller_frontier import frontier_figure

    html = frontier_figure(rows).to_html(include_plotlyjs=True, full_html=True).encode("utf-8")
    with atomic_output(target, need_bytes=len(html)) as handle:
        handle.write(html)
    print(f"wrote {terminal_text(target)}", file=sys.stderr)
