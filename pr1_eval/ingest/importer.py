"""``pr1-eval import``: generations made elsewhere become a run, graded exactly like ours.

Input: JSON Lines, one object per sample: ``task``, ``problem_id``, ``sample_idx``,
``response`` (required), ``gold`` and optionally ``problem``, ``model``, ``step``. Task names
need not be registered. A malformed line is reported with file, line and field; nothing is
skipped or coerced silently (each field's rule: :mod:`pr1_eval.ingest.fields`). A sample without
a usable gold is stored as *could not score*, named in a warning, and left out of every metric. An import never writes over a run: ``--out`` holding one is refused, and
``replace=True`` (``--replace``) moves the old run aside first (:mod:`pr1_eval.store.out_folder`).
The import holds the run's writer lock (:mod:`pr1_eval.store.run_lock`) from that check to its last
write, so two imports to one ``--out`` end with one run and one refusal.
Each task is compared with the packaged benchmark of its name, and the verdict recorded in
``run.json`` (:mod:`pr1_eval.ingest.benchmark_check`): a subset of a benchmark reports as partial.

The file declares the run's problem set: each task's problems are the ones it holds, and each
task's k is the most samples any of its problems has (AIME ×16 and MATH300 ×1 in one file is two
tasks with k 16 and 1). A problem with fewer samples than its task's k is stored, and the report
names it as incomplete. ``--k N`` (or ``--k aime24=16,math300_pr1=1``) sets k instead and keeps
the N lowest ``sample_idx`` of every problem, recording how many samples it left out.

Block positions are in characters, since an import knows no tokenizer; ``--tokenizer DIR`` (the
folder of the model that wrote the responses) makes them token positions computed exactly as a
generated run's (re-tokenising the response), so an import and a run of the same model share one
unit. Decision: without it positions stay in characters and say so (``position_unit``), never
guessed with some other vocabulary; the analysis and the leaderboard keep the two units apart.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.grading.annotate import annotate_grades, annotate_structure, position_unit, token_offsets
from pr1_eval.grading.policy import DEFAULT_POLICY, check_policy
from pr1_eval.ingest import fields
from pr1_eval.ingest.benchmark_check import check_import, note_of
from pr1_eval.inputs.model_files import check_tokenizer_files
from pr1_eval.jsonl import iter_jsonl
from pr1_eval.records.benchmark_check import warnings_of
from pr1_eval.records.provenance import checkpoint_step, now_iso, package_versions
from pr1_eval.records.run import ModelInfo, RunRecord, task_entry
from pr1_eval.records.sample import SampleRecord
from pr1_eval.store.out_folder import check_new_run_folder, set_aside
from pr1_eval.store.run_lock import run_lock
from pr1_eval.store.run_store import RunStore
from pr1_eval.terminal import terminal_text

REQUIRED = ("task", "problem_id", "sample_idx", "response")
#: Problems without a usable gold named one warning line each, before "… N more".
SHOWN_NO_GOLD = 10


def read_import_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of an import file, validated; errors name file and line."""
    rows = []
    for where, row in iter_jsonl(path):
        missing = [k for k in REQUIRED if k not in row]
        if missing:
            raise Pr1EvalError(f"{where}: missing field(s) {', '.join(missing)}; each line needs {', '.join(REQUIRED)} "
                               "and a gold")
        row["_where"] = where
        rows.append(row)
    return rows


def load_tokenizer(folder: str | Path) -> Any:
    """The fast tokenizer in a local model folder (``--tokenizer``); a clear error otherwise."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise Pr1EvalError(f"--tokenizer {folder}: not a folder; pass the local folder of the model that wrote the responses")
    check_tokenizer_files(path, "--tokenizer")  # the check `run` makes of its model folder
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - any loading failure is the same advice
        raise Pr1EvalError(f"--tokenizer {folder}: no tokenizer could be loaded ({type(exc).__name__}: {exc}); "
                           "pass a folder holding tokenizer.json / tokenizer_config.json") from None
    if position_unit(tokenizer) != "token":
        raise Pr1EvalError(f"--tokenizer {folder}: a slow tokenizer gives no character offsets, so no token "
                           "positions; pass a folder with a fast tokenizer (tokenizer.json)")
    return tokenizer


def _validated(row: dict[str, Any]) -> tuple[SampleRecord, str | None]:
    """The record of one row, every field checked (:mod:`pr1_eval.ingest.fields`), and why its
    gold cannot be scored (None: it can)."""
    where = str(row.get("_where", "row"))
    gold, no_gold = fields.gold_or_reason(row, where)
    for name in ("model", "finish_reason"):
        fields.optional_text(row.get(name), where, name)
    if row.get("step") is not None:
        fields.whole_number(row["step"], where, "step")
    record = SampleRecord(task=fields.text(row["task"], where, "task"),
                          problem_id=fields.identifier(row["problem_id"], where, "problem_id"),
                          sample_idx=fields.whole_number(row["sample_idx"], where, "sample_idx"),
                          problem=fields.optional_text(row.get("problem"), where, "problem"),
                          response=fields.text(row["response"], where, "response", required=False), gold=gold,
                          finish_reason=str(row.get("finish_reason") or "unknown"))
    _probed(record, row, where)
    return record, no_gold


def _probed(record: SampleRecord, row: dict[str, Any], where: str) -> None:
    """The optional token count and probe answers of an answers-only row (:mod:`pr1_eval.ingest.parallel_probe`)."""
    if row.get("n_response_tokens") is not None:
        record.n_response_tokens = fields.whole_number(row["n_response_tokens"], where, "n_response_tokens")
    probes = row.get("probe_answers")
    if probes is None:
        return
    if not isinstance(probes, list):
        raise fields.field_error(where, "probe_answers", probes, "a list of answer strings")
    record.probe_answers = [fields.text(a, where, "probe_answers", required=False) for a in probes]
    if row.get("probe_interval") is None:
        raise fields.field_error(where, "probe_interval", None, "the tokens between two probes, e.g. 500")
    record.probe_interval = fields.whole_number(row["probe_interval"], where, "probe_interval")


def _warn_no_gold(rows: list[dict[str, Any]], records: list[SampleRecord], reasons: list[str | None]) -> None:
    """One warning line per problem whose samples cannot be scored (the first line naming it)."""
    problems: dict[tuple[str, str], tuple[str, str, int]] = {}
    for row, record, reason in zip(rows, records, reasons, strict=True):
        if reason is not None:
            where, why, n = problems.get((record.task, record.problem_id), (str(row.get("_where", "row")), reason, 0))
            problems[(record.task, record.problem_id)] = (where, why, n + 1)
    for i, ((task, pid), (where, why, n)) in enumerate(problems.items()):
        if i == SHOWN_NO_GOLD:
            print(f"warning: … {len(problems) - SHOWN_NO_GOLD} more problem(s) without a usable gold", file=sys.stderr)
            break
        print(terminal_text(f"warning: {where}: field 'gold' {why}; expected a non-empty string: {n} sample(s) of {task} "
                            f"problem {pid} are stored as could not score (left out of every metric, never counted "
                            "wrong)"), file=sys.stderr)


def _structured(record: SampleRecord, tokenizer: Any = None) -> SampleRecord:
    offsets = token_offsets(tokenizer, record.response)
    if offsets is not None:
        record.n_response_tokens = len(offsets)
    return annotate_structure(record, offsets)


def parse_k_option(text: str | None) -> int | dict[str, int] | None:
    """``--k``: ``"4"`` (every task) or ``"aime24=16,math300_pr1=1"`` (per task)."""
    if text is None or not str(text).strip():
        return None
    try:
        if "=" not in text:
            value: int | dict[str, int] = int(text)
        else:
            value = {name.strip(): int(n) for name, n in (part.split("=", 1) for part in text.split(",") if part.strip())}
    except ValueError:
        raise Pr1EvalError(f"--k {text!r}: expected a number (--k 4) or task=number pairs (--k aime24=16,math300_pr1=1)") from None
    values = [value] if isinstance(value, int) else list(value.values())
    if any(v < 1 for v in values):
        raise Pr1EvalError(f"--k {text!r}: k must be at least 1")
    return value


def _task_k(held: dict[str, list[int]], task: str, k: int | Mapping[str, int] | None) -> int:
    """The k of ``task``: from ``--k``, else the most samples any of its problems has."""
    if isinstance(k, int):
        return k
    if k is not None and task in k:
        return int(k[task])
    return max(len(indices) for indices in held.values())


def _declare(records: list[SampleRecord], k: int | Mapping[str, int] | None
             ) -> tuple[list[SampleRecord], dict[str, tuple[list[str], int]], int]:
    """(records kept, task → (problem ids in file order, k), samples left out by ``--k``)."""
    held: dict[str, dict[str, list[int]]] = {}
    for record in records:
        held.setdefault(record.task, {}).setdefault(record.problem_id, []).append(record.sample_idx)
    if isinstance(k, Mapping) and (unknown := sorted(set(k) - set(held))):
        raise Pr1EvalError(f"--k names task(s) {', '.join(unknown)} that the file does not hold "
                           f"(it holds {', '.join(held)})")
    declared = {task: (list(problems), _task_k(problems, task, k)) for task, problems in held.items()}
    keep = {(task, pid, idx) for task, problems in held.items() for pid, indices in problems.items()
            for idx in sorted(indices)[: declared[task][1]]}
    kept = [r for r in records if r.key() in keep]
    return kept, declared, len(records) - len(kept)


def import_rows(rows: Iterable[dict[str, Any]], out_dir: str | Path, *, source: str, workers: int | None = None,
                extra_run_info: dict[str, Any] | None = None, k: int | Mapping[str, int] | None = None,
                tokenizer: str | Path | None = None, replace: bool = False,
                answer_policy: str = DEFAULT_POLICY) -> Path:
    """Grade and store imported rows as a run at ``out_dir``; returns the run directory.

    ``k``: samples per problem, for every task (int) or per task (mapping); default: per task,
    the most any of its problems has (see the module docstring). ``tokenizer``: a local model
    folder whose tokenizer gives token positions (default: character positions). ``out_dir`` must
    not hold a run; with ``replace`` one there is renamed aside (never deleted) once the new
    samples are graded. ``answer_policy`` (:mod:`pr1_eval.grading.policy`; default ``paper``, the
    reading of every import before policies: an import names no prompt to choose by) is recorded.
    """
    check_policy(answer_policy)
    with run_lock(out_dir, "pr1-eval import"):  # from the check to the last write: one writer per run
        return _import_locked(rows, out_dir, source=source, workers=workers, extra_run_info=extra_run_info, k=k,
                              tokenizer=tokenizer, replace=replace, answer_policy=answer_policy)


def unfinished_import(out_dir: str | Path, source: str) -> bool:
    """``out_dir`` holds an import of ``source`` that never finished (status ``importing``: killed,
    or stopped by a full disk). Importing the same source again redoes it in place, the way a rerun
    of ``run`` resumes; any other run there is refused as usual."""
    store = RunStore(out_dir)
    try:
        record = store.read_run() if store.exists() else None
    except Pr1EvalError:
        return False
    return record is not None and record.status == "importing" and record.imported_from == source


def _import_locked(rows: Iterable[dict[str, Any]], out_dir: str | Path, *, source: str, workers: int | None,
                   extra_run_info: dict[str, Any] | None, k: int | Mapping[str, int] | None,
                   tokenizer: str | Path | None, replace: bool, answer_policy: str) -> Path:
    if not unfinished_import(out_dir, source):
        check_new_run_folder(out_dir, command="import", replace=replace)  # before the slow grading
    rows = list(rows)
    if not rows:
        raise Pr1EvalError(f"{source}: no samples to import")
    checked = [_validated(r) for r in rows]  # every field, before the tokenizer and the slow grading
    loaded_tokenizer = None if tokenizer is None else load_tokenizer(tokenizer)
    records = [_structured(record, loaded_tokenizer) for record, _ in checked]
    _warn_no_gold(rows, records, [reason for _, reason in checked])
    seen: dict[tuple[str, str, int], str] = {}
    for row, record in zip(rows, records, strict=True):
        if record.key() in seen:
            raise Pr1EvalError(f"{row.get('_where', source)}: duplicate sample {record.key()} (first at {seen[record.key()]})")
        seen[record.key()] = str(row.get("_where", source))
    records, declared, left_out = _declare(records, k)
    benchmarks = check_import(records)
    for task, check in benchmarks.items():
        for line in warnings_of(task, check):
            print(f"warning: {terminal_text(line)}", file=sys.stderr)
        if (note := note_of(task, check)) is not None:
            print(f"note: {terminal_text(note)}", file=sys.stderr)
    annotate_grades(records, workers=workers, progress=True, policy=answer_policy)
    models = {str(r["model"]) for r in rows if r.get("model")}
    steps = {int(r["step"]) for r in rows if r.get("step") is not None}
    model = models.pop() if len(models) == 1 else (None if not models else "mixed")
    step = steps.pop() if len(steps) == 1 else checkpoint_step(model or "")
    ks = {task_k for _, task_k in declared.values()}
    store = RunStore(out_dir)
    run = RunRecord(
        name=Path(out_dir).name, status="importing", imported_from=source,
        model=ModelInfo(path=model, step=step), engine={"backend": "import"}, decoding={"mode": "unknown"},
        tasks={task: task_entry(ids, task_k, version=None, source=source, data_hash=None)
               for task, (ids, task_k) in declared.items()},
        k=ks.pop() if len(ks) == 1 else None, k_option=dict(k) if isinstance(k, Mapping) else k,
        samples_left_out_by_k=left_out, packages=package_versions(), started_at=now_iso(), finished_at=now_iso(),
        position_unit=position_unit(loaded_tokenizer), answer_policy=answer_policy,
    ).with_sections({**(extra_run_info or {}), "benchmark_check": benchmarks})
    if tokenizer is not None:  # which vocabulary the token positions count
        run = dataclasses.replace(run, engine={**run.engine, "tokenizer": str(Path(tokenizer).expanduser().resolve())})
    if replace and not unfinished_import(out_dir, source) and (aside := set_aside(out_dir)) is not None:
        print(f"moved the run that was in {out_dir} aside to {aside} (nothing deleted; no search counts it)",
              file=sys.stderr)
        run = run.with_sections({"replaces": {"on": now_iso(), "kept_at": str(aside)}})
    store.write_run(run)  # "importing" until the samples are in place: a killed import reads as incomplete
    store.rewrite(records)
    store.write_run(dataclasses.replace(run, status="complete"))
    return Path(out_dir)


def import_jsonl(path: str | Path, out_dir: str | Path, *, workers: int | None = None,
                 k: int | Mapping[str, int] | None = None, tokenizer: str | Path | None = None,
                 replace: bool = False, answer_policy: str = DEFAULT_POLICY) -> Path:
    """Import a JSON Lines file (see module docstring) as a run."""
    with run_lock(out_dir, "pr1-eval import"):
        if not unfinished_import(out_dir, str(path)):
            check_new_run_folder(out_dir, command="import", replace=replace)  # before reading a large file
        return import_rows(read_import_jsonl(path), out_dir, source=str(path), workers=workers, k=k,
                           tokenizer=tokenizer, replace=replace, answer_policy=answer_policy)
