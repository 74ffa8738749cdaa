"""The first real input: ``parallel_gsm8k.jsonl`` (341 teacher traces) as a pr1-eval run.

Why through the importer: the analysis must see these traces exactly as it sees any run
(structure parsed, answers graded by the one grader), so the file is only reshaped into the
import format (``task, problem_id, sample_idx, response, gold, problem, model``) and handed to
:func:`pr1_eval.ingest.importer.import_jsonl`'s machinery (``import_rows``, so that run.json names the
original file rather than the reshaped copy).
"""

from __future__ import annotations

import json
from pathlib import Path

from pr1_eval.errors import Pr1EvalError
from pr1_eval.inputs.paths import resolve_training_dir
from pr1_eval.jsonl import iter_jsonl
from pr1_eval.store.safe_write import atomic_output

TASK = "parallel_gsm8k"
MODEL = "teacher"
FILE_NAME = "parallel_gsm8k.jsonl"


def default_source() -> Path:
    """``parallel_gsm8k.jsonl`` in the shared training folder (raises when there is none)."""
    folder = resolve_training_dir()
    if folder is None or not (folder / FILE_NAME).is_file():
        raise Pr1EvalError(f"{FILE_NAME} not found; set PR1_TRAINING_DIR to the folder holding it")
    return folder / FILE_NAME


def to_import_jsonl(source: str | Path, target: str | Path) -> Path:
    """Rewrite the training file (``id, problem, answer, response``) as import lines; returns
    ``target``. Raises, naming file and line, on a row without those fields."""
    source, target = Path(source), Path(target)
    with atomic_output(target) as dst:  # whole or not at all: a killed rewrite never leaves half a file
        for where, row in iter_jsonl(source):
            missing = [k for k in ("id", "answer", "response") if k not in row]
            if missing:
                raise Pr1EvalError(f"{where}: missing field(s) {', '.join(missing)}")
            out = {"task": TASK, "problem_id": str(row["id"]), "sample_idx": 0, "response": row["response"],
                   "gold": str(row["answer"]), "problem": row.get("problem", ""), "model": MODEL}
            dst.write((json.dumps(out, ensure_ascii=False) + "\n").encode("utf-8"))
    return target


def import_parallel_gsm8k(out_dir: str | Path, source: str | Path | None = None, *, workers: int | None = None) -> Path:
    """Import the traces as a run at ``out_dir`` (graded by pr1-eval's grader); returns it."""
    from pr1_eval.ingest.importer import import_rows, read_import_jsonl

    out_dir = Path(out_dir)
    source = Path(source or default_source())
    staged = to_import_jsonl(source, out_dir.parent / f".{out_dir.name}.import.jsonl")
    try:
        # import_jsonl's own body, but recording the original file (not the staged one) as source
        return import_rows(read_import_jsonl(staged), out_dir, source=str(source), workers=workers,
                           extra_run_info={"converted_by": "analysis.real_data"})
    finally:
        staged.unlink(missing_ok=True)
