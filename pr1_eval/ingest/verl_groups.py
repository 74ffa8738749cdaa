"""A dump file's rows → the records of one step's run: groups, problems, sample indices, k.

Groups (see :mod:`pr1_eval.ingest.verl_import` for the whole rule): V1 rows by their uid's uuid,
a multi-turn session keeping its last output; legacy and fork rows by prompt text. Groups of one
problem are pooled, and a sample's ``sample_idx`` is its place among the problem's samples.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.grading.annotate import annotate_structure, token_offsets
from pr1_eval.ingest.verl_formats import DumpRow, Lengths, iter_dump, problem_text
from pr1_eval.ingest.verl_match import UNMATCHED, KnownProblem, ProblemIndex, normalise, prompt_id
from pr1_eval.records.sample import SampleRecord


@dataclass
class ParsedStep:
    """One dump file read: its rows (padding and earlier turns left out) and what was left out."""

    format: str = ""
    rows: list[DumpRow] = field(default_factory=list)
    padding: int = 0
    earlier_turns: int = 0
    other_step: int = 0
    sha256: str = ""
    notes: list[str] = field(default_factory=list)  # the kept rows' (DumpRow.notes)


def read_step(path: Path, step: int, lengths: Lengths) -> ParsedStep:
    """Stream one dump file (hashing it on the way) into a :class:`ParsedStep`."""
    parsed = ParsedStep()
    digest = hashlib.sha256()
    for fmt, row in iter_dump(path, lengths, digest):
        parsed.format = fmt
        if row.padding:
            parsed.padding += 1
            continue
        if row.step != step:
            raise Pr1EvalError(f"{row.where}: field 'step' is {row.step}; expected {step}, the step its file "
                               f"{path.name} holds (VERL writes each step's rows to their own file: this file is "
                               f"damaged or was joined by hand; move the row to {row.step}.jsonl or delete it)")
        parsed.rows.append(row)
    parsed.sha256 = digest.hexdigest()
    parsed.rows, parsed.earlier_turns = _last_turns(parsed.rows)
    parsed.notes = [note for row in parsed.rows for note in row.notes]
    return parsed


def _last_turns(rows: list[DumpRow]) -> tuple[list[DumpRow], int]:
    """Keep each V1 session's last output (the highest index), as VERL's own metrics do."""
    last: dict[tuple[str, int], int] = {}
    for row in rows:
        if row.group is not None:
            key = (row.group, row.order[0])
            last[key] = max(last.get(key, 0), row.order[1])
    kept = [r for r in rows if r.group is None or r.order[1] == last[(r.group, r.order[0])]]
    return kept, len(rows) - len(kept)


def _reward_info(row: DumpRow) -> str | None:
    return json.dumps(row.reward_info, ensure_ascii=False, default=str, sort_keys=True) if row.reward_info else None


def step_records(parsed: ParsedStep, index: ProblemIndex, tokenizer: Any = None
                 ) -> tuple[list[SampleRecord], dict[str, KnownProblem], int, int]:
    """(records, task → a problem of it (for its source), groups, unmatched problems).

    ``tokenizer`` (``--tokenizer``): block positions in tokens, and a response's token count where
    the dump gave none (VERL 0.9.1: the re-tokenised text, which lacks the deleted tags and the
    eos, so it undercounts by those)."""
    groups: dict[str, list[DumpRow]] = {}
    for row in parsed.rows:
        groups.setdefault(row.group or normalise(row.prompt), []).append(row)
    counters: dict[tuple[str, str], int] = {}
    tasks: dict[str, KnownProblem] = {}
    records: list[SampleRecord] = []
    for members in groups.values():
        text = problem_text(members[0].prompt)
        known = index.match(text) or KnownProblem(UNMATCHED, prompt_id(text), None)
        tasks.setdefault(known.task, known)
        for row in sorted(members, key=lambda r: r.order):
            key = (known.task, known.problem_id)
            counters[key] = counters.get(key, -1) + 1
            record = SampleRecord(
                task=known.task, problem_id=known.problem_id, sample_idx=counters[key], task_version=known.version,
                prompt_hash=hashlib.sha256(row.prompt.encode()).hexdigest()[:16], problem=text,
                response=row.response, finish_reason=row.finish_reason, n_prompt_tokens=row.n_prompt_tokens,
                n_response_tokens=row.n_response_tokens, gold=known.gold or row.gold or "", reward=row.score,
                reward_acc=row.acc, reward_info=_reward_info(row))
            offsets = token_offsets(tokenizer, record.response)
            if offsets is not None and record.n_response_tokens is None:
                record.n_response_tokens = len(offsets)
            records.append(annotate_structure(record, offsets))
    unmatched = len({pid for task, pid in counters if task == UNMATCHED})
    return records, tasks, len(groups), unmatched
