"""``pr1-eval import``: generations made elsewhere become a run, graded exactly like ours.

Input: JSON Lines, one object per sample: ``task``, ``problem_id``, ``sample_idx``,
``response``, ``gold`` (required) and optionally ``problem``, ``model``, ``step``. Task names
need not be registered. A malformed line is reported with file and line number; nothing is
skipped silently. Importing into an existing run directory replaces its samples (imports are
one-shot, not resumable appends).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pr1_eval.annotate import annotate_grades, annotate_structure
from pr1_eval.errors import Pr1EvalError
from pr1_eval.jsonl import iter_jsonl
from pr1_eval.records import SampleRecord
from pr1_eval.runinfo import checkpoint_step, now_iso, package_versions
from pr1_eval.store import RunStore

REQUIRED = ("task", "problem_id", "sample_idx", "response", "gold")


def read_import_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of an import file, validated; errors name file and line."""
    rows = []
    for where, row in iter_jsonl(path):
        missing = [k for k in REQUIRED if k not in row]
        if missing:
            raise Pr1EvalError(f"{where}: missing field(s) {', '.join(missing)}; each line needs {', '.join(REQUIRED)}")
        row["_where"] = where
        rows.append(row)
    return rows


def _to_record(row: dict[str, Any]) -> SampleRecord:
    where = row.get("_where", "row")
    try:
        sample_idx = int(row["sample_idx"])
    except (TypeError, ValueError):
        raise Pr1EvalError(f"{where}: sample_idx must be an integer, got {row['sample_idx']!r}") from None
    if not isinstance(row["response"], str):
        raise Pr1EvalError(f"{where}: response must be a string")
    record = SampleRecord(task=str(row["task"]), problem_id=str(row["problem_id"]), sample_idx=sample_idx,
                          problem=str(row.get("problem") or ""), response=row["response"], gold=str(row["gold"]),
                          finish_reason=str(row.get("finish_reason") or "unknown"))
    return annotate_structure(record)


def import_rows(rows: Iterable[dict[str, Any]], out_dir: str | Path, *, source: str, workers: int | None = None,
                extra_run_info: dict[str, Any] | None = None) -> Path:
    """Grade and store imported rows as a run at ``out_dir``; returns the run directory."""
    rows = list(rows)
    if not rows:
        raise Pr1EvalError(f"{source}: no samples to import")
    records = [_to_record(r) for r in rows]
    seen: dict[tuple[str, str, int], str] = {}
    for row, record in zip(rows, records, strict=True):
        if record.key() in seen:
            raise Pr1EvalError(f"{row.get('_where', source)}: duplicate sample {record.key()} (first at {seen[record.key()]})")
        seen[record.key()] = str(row.get("_where", source))
    annotate_grades(records, workers=workers, progress=True)
    models = {str(r["model"]) for r in rows if r.get("model")}
    steps = {int(r["step"]) for r in rows if r.get("step") is not None}
    model = models.pop() if len(models) == 1 else (None if not models else "mixed")
    step = steps.pop() if len(steps) == 1 else checkpoint_step(model or "")
    per_problem: dict[tuple[str, str], int] = {}
    for record in records:
        per_problem[(record.task, record.problem_id)] = per_problem.get((record.task, record.problem_id), 0) + 1
    k = max(per_problem.values())
    store = RunStore(out_dir)
    run_json = {
        "name": Path(out_dir).name, "imported_from": source, "model": {"path": model, "revision": None, "step": step},
        "engine": {"backend": "import"}, "decoding": {"mode": "unknown"}, "sampling": None, "prompt": None,
        "tasks": {t: {"version": None, "source": source, "data_hash": None,
                      "n_problems": len({p for (tt, p) in per_problem if tt == t})} for t in sorted({r.task for r in records})},
        "k": k, "seed": None, "packages": package_versions(), "started_at": now_iso(), "finished_at": now_iso(),
        "status": "complete", **(extra_run_info or {}),
    }
    store.write_run_json(run_json)
    store.rewrite(records)
    return Path(out_dir)


def import_jsonl(path: str | Path, out_dir: str | Path, *, workers: int | None = None) -> Path:
    """Import a JSON Lines file (see module docstring) as a run."""
    return import_rows(read_import_jsonl(path), out_dir, source=str(path), workers=workers)
