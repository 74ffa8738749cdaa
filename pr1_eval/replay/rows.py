"""One table row per (task, controller): what ``pr1-eval replay`` prints, writes and compares.

``match``: ``exact`` (the authors' verdict: the reported string equals the gold) or ``grader``
(pr1-eval's grader, as the report grades: each distinct reported answer is graded once as a
``Final Answer:`` line against the gold). The two differ only where an answer is written unlike
its gold (``0.5`` for ``\\frac{1}{2}``); the replay prints which it used.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.grading.grade import answer_classes_many, grade_responses
from pr1_eval.ingest.parallel_probe import NO_ANSWER, ProbeQuestion
from pr1_eval.replay.certified import CertifiedMajority
from pr1_eval.replay.evaluate import QuestionOutcome, exact_match, run_controller, summarize
from pr1_eval.replay.sources import ReplaySource
from pr1_eval.replay.specs import AUTHORS_ROW, ControllerSpec

MATCHES = ("exact", "grader")


@dataclass(frozen=True)
class ReplayRow:
    """A controller's figures on one task (means over seeds), and the authors' where known."""

    source: str
    model: str
    task: str
    controller: str
    questions: int
    seeds: int
    match: str
    acc: float
    tokens: float
    seq_tokens: float
    branches: float
    acc_sd_over_seeds: float
    authors_acc: float | None = None
    authors_tokens: float | None = None
    authors_seq_tokens: float | None = None
    #: The authors' name of this controller (``Solver/Strategy`` of their CSV), where it has one.
    authors_row: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "vs_authors": agreement(self)}


def agreement(row: ReplayRow) -> str | None:
    """``"equal"`` when our row prints what the authors' does (Acc to their 0.01, Cost and
    Seq_Cost after their ``int()``), else the differences (``Δacc +0.12 pp, Δtokens -35``);
    ``None`` without an authors' row. Why a word: 63 cells compared by eye is no check."""
    if row.authors_acc is None or row.authors_tokens is None or row.authors_seq_tokens is None:
        return None
    d_acc = round(row.acc - row.authors_acc, 2)
    d_tok = int(row.tokens) - int(row.authors_tokens)
    d_seq = int(row.seq_tokens) - int(row.authors_seq_tokens)
    if d_acc == 0 and d_tok == 0 and d_seq == 0:
        return "equal"
    parts = [f"Δacc {d_acc:+.2f} pp" if d_acc else "", f"Δtokens {d_tok:+,}" if d_tok else "",
             f"Δsequential {d_seq:+,}" if d_seq else ""]
    return ", ".join(p for p in parts if p)


def _grader_match(outcomes: Sequence[QuestionOutcome], source: ReplaySource) -> Any:
    """A verdict function backed by one grading of each distinct (answer, gold) pair."""
    gold = {q.index: q.gold for q in source.questions}
    pairs = sorted({(o.answer, gold[o.question]) for o in outcomes if o.answer is not None})
    results = grade_responses([(f"Final Answer: {a}", g) for a, g in pairs])
    verdicts = {pair: bool(r.correct) for pair, r in zip(pairs, results, strict=True)}
    return lambda answer, g: answer is not None and verdicts[(answer, g)]


def grader_classes(questions: Sequence[ProbeQuestion]) -> dict[tuple[str, str], str]:
    """(question, answer) → its class's representative (the class's first answer in branch order), by
    the project's grader: math-equivalent answers of one question share a class."""
    groups = [list(dict.fromkeys(b.final_answer for b in q.branches if b.final_answer not in (NO_ANSWER, "")))
              for q in questions]
    out: dict[tuple[str, str], str] = {}
    for q, group, ids in zip(questions, groups, answer_classes_many(groups), strict=True):
        first: dict[int, str] = {}
        for answer, cls in zip(group, ids, strict=True):
            if cls is None:
                continue
            out[(q.question, answer)] = first.setdefault(cls, answer)
    return out


def replay_row(source: ReplaySource, spec: ControllerSpec, seeds: Sequence[int], match: str) -> ReplayRow:
    """Replay one controller on one source."""
    if match not in MATCHES:
        raise Pr1EvalError(f"--match {match!r}: choose one of {', '.join(MATCHES)}")
    controller = spec.controller
    if isinstance(controller, CertifiedMajority) and controller.classes is None:  # votes by grader class
        controller = dataclasses.replace(controller, classes=grader_classes(source.questions))
    outcomes = run_controller(controller, source.questions, seeds)
    verdict = exact_match if match == "exact" else _grader_match(outcomes, source)
    result = summarize(outcomes, source.questions, verdict)
    mean = result.accuracy
    sd = (sum((a - mean) ** 2 for a in result.seed_accuracies) / len(result.seed_accuracies)) ** 0.5
    return ReplayRow(source=source.label, model=source.model, task=source.task, controller=spec.text,
                     questions=len(source.questions), seeds=len(seeds), match=match, acc=result.acc_percent,
                     tokens=result.tokens, seq_tokens=result.sequential_tokens, branches=result.branches_started,
                     acc_sd_over_seeds=round(100 * sd, 2))


#: The most an authors' CSV may weigh: theirs are under 1 KB; a link to ``/dev/zero`` was read
#: without end (0.83 GB in 20 s).
MOST_AUTHORS_BYTES = 4 * 1024 * 1024
#: The columns an authors' CSV must hold, and those of them that are figures.
AUTHORS_NEEDED = ("Solver", "Strategy", "Acc", "Cost", "Seq_Cost")
_FIGURES = ("Acc", "Cost", "Seq_Cost")


def _authors_text(path: Path) -> str:
    """The CSV's text, read with a bound, or one line saying why it cannot be."""
    try:
        if not path.is_file():
            raise Pr1EvalError(f"{path}: not a regular file; pass the authors' matrix_results CSV")
        with path.open("rb") as handle:
            data = handle.read(MOST_AUTHORS_BYTES + 1)
    except OSError as exc:
        raise Pr1EvalError(f"{path}: cannot read ({exc.strerror}); pass the authors' matrix_results CSV") from None
    if len(data) > MOST_AUTHORS_BYTES:
        raise Pr1EvalError(f"{path}: larger than {MOST_AUTHORS_BYTES // 2**20} MiB (an authors' results CSV is a few "
                           "KB); pass the authors' matrix_results CSV")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Pr1EvalError(f"{path}: not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x}); save it as "
                           "UTF-8") from None


def _figure(text: str | None, where: str) -> float:
    try:
        value = float(text or "")
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise Pr1EvalError(f"{where}: {str(text)[:30]!r} is not a finite number; the authors' CSV gives a number "
                           "here")
    return value


def read_authors_csv(path: str | Path) -> list[dict[str, str]]:
    """The rows of an authors' ``*_raw.csv`` (Solver, Strategy, Acc, Cost, Seq_Cost, parameters),
    every row checked: as many fields as the header, finite figures and budgets. A bad row is one
    line naming file, line and column (it was a traceback, or a comparison silently left out)."""
    path = Path(path)
    lines = list(csv.reader(io.StringIO(_authors_text(path), newline="")))
    header = lines[0] if lines else []
    if not set(AUTHORS_NEEDED) <= set(header) or len(lines) < 2:
        raise Pr1EvalError(f"{path}: not an authors' results CSV with rows (needs {', '.join(AUTHORS_NEEDED)})")
    rows = []
    for number, fields in enumerate(lines[1:], start=2):
        if not fields:
            continue
        if len(fields) != len(header):
            raise Pr1EvalError(f"{path}:{number}: {len(fields)} fields where the header has {len(header)}; "
                               "the file is cut or edited: use the authors' file as released")
        row = dict(zip(header, fields, strict=True))
        for column in (*_FIGURES, *(c for c in ("solver_n", "num_chains") if row.get(c))):
            _figure(row.get(column), f"{path}:{number} column {column}")
        rows.append(row)
    return rows


def authors_note(spec: ControllerSpec, authors: list[dict[str, str]], task: str) -> str | None:
    """Why ``spec``'s row shows no authors' figures though their CSV for ``task`` was given, when
    the reason is in the CSV (several rows for one controller and budget: which one is theirs
    cannot be known); None otherwise."""
    matches = _matching(spec, authors)
    if len(matches) > 1 and not spec.params:
        return (f"note: the authors' CSV for {task} holds {len(matches)} rows for {spec.text} "
                f"({'/'.join(AUTHORS_ROW[spec.name])} at this budget); none is compared")
    return None


def _matching(spec: ControllerSpec, authors: list[dict[str, str]]) -> list[dict[str, str]]:
    wanted = AUTHORS_ROW.get(spec.name)
    return [r for r in authors if (r["Solver"], r["Strategy"]) == wanted and _budget(r) in (None, float(spec.n))]


def with_authors(row: ReplayRow, spec: ControllerSpec, authors: list[dict[str, str]]) -> ReplayRow:
    """``row`` with the authors' figures of the same controller, when their CSV has one row for it
    at the same branch budget (their ``solver_n``/``num_chains``; SAC has none)."""
    matches = _matching(spec, authors)
    if len(matches) != 1 or spec.params:
        return row
    theirs = matches[0]
    return ReplayRow(**{**asdict(row), "authors_acc": float(theirs["Acc"]), "authors_tokens": float(theirs["Cost"]),
                        "authors_seq_tokens": float(theirs["Seq_Cost"]), "authors_row": authors_name(spec.name)})


def authors_name(name: str) -> str | None:
    """The authors' ``Solver/Strategy`` that controller ``name`` (``sc``, ``probe``, ...) reproduces."""
    wanted = AUTHORS_ROW.get(name)
    return None if wanted is None else "/".join(wanted)


def _budget(row: dict[str, str]) -> float | None:
    for key in ("solver_n", "num_chains"):
        if row.get(key):
            return float(row[key])
    return None
