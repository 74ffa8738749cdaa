"""Builders for analysis tests: hand-made responses, records and run directories.

Records pass through pr1_eval's own ``annotate_structure`` and ``extract_answer`` (as generated
or imported samples do), so the analysis is tested on exactly what the harness would store.
Responses are laid out with every tag on its own line, so whitespace-split "tokens" give
hand-countable token positions.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from pr1_eval.grading import extract_answer
from pr1_eval.grading.annotate import annotate_structure
from pr1_eval.records.run import RunRecord
from pr1_eval.records.sample import SampleRecord
from pr1_eval.store.run_store import RunStore

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in these tests may reach the hub


def block(paths: Sequence[str], summary: str = "They agree.") -> str:
    """One well-formed block, tags on their own lines."""
    body = "".join(f"<Path>\n{p}\n</Path>\n" for p in paths)
    return f"<Parallel>\n{body}</Parallel>\n<Summary>\n{summary}\n</Summary>\n"


def response(*parts: str, final: str | None = "5") -> str:
    """Plain text and blocks in order, then ``Final Answer: final`` (omitted when None)."""
    text = "\n".join(parts)
    return text + (f"\nFinal Answer: {final}" if final is not None else "")


def whitespace_offsets(text: str) -> list[tuple[int, int]]:
    """Character ranges of whitespace-separated tokens (a stand-in tokenizer)."""
    return [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]


def make_record(task: str, problem_id: str, sample_idx: int, text: str, *, correct: bool | None = None,
                tokens: bool = False, gold: str = "5") -> SampleRecord:
    """A record annotated like the harness does; ``tokens`` adds whitespace token positions."""
    record = SampleRecord(task=task, problem_id=problem_id, sample_idx=sample_idx, response=text, gold=gold)
    offsets = whitespace_offsets(text) if tokens else None
    annotate_structure(record, offsets)
    if offsets is not None:
        record.n_response_tokens = len(offsets)
    answer = extract_answer(text)
    record.extracted_answer, record.answer_source = answer.text, answer.source
    record.correct = correct
    record.grade_status = "ungraded" if correct is None else "ok"
    return record


def write_run(root: Path, name: str, records: Sequence[SampleRecord], *, step: int | None = None,
              model: str | None = "org/model", decoding: str = "forkjoin", extra: dict[str, Any] | None = None) -> Path:
    """A run directory (run.json + one parquet part) at ``root/name``; run.json declares the tasks and
    problems of ``records`` (as the harness does), each with k = the most samples any of its problems has."""
    store = RunStore(root / name)
    held: dict[str, dict[str, int]] = {}
    for record in records:
        counts = held.setdefault(record.task, {})
        counts[record.problem_id] = counts.get(record.problem_id, 0) + 1
    tasks = {task: {"n_problems": len(counts), "problem_ids": list(counts), "k": max(counts.values())}
             for task, counts in held.items()}
    info = {"name": name, "model": {"path": model, "revision": None, "step": step}, "decoding": {"mode": decoding},
            "k": 1, "tasks": tasks, "status": "complete", **(extra or {})}
    store.write_run(RunRecord.from_dict(info))
    if records:
        store.append(list(records))
    return store.root


@lru_cache(maxsize=1)
def embedding_model() -> Any:
    """The bundled all-MiniLM-L6-v2 on CPU, loaded once per test session (loading takes seconds)."""
    from analysis.diversity.embedding import load_embedding_model

    return load_embedding_model("all-MiniLM-L6-v2", device="cpu")
