"""Turn lm-eval's ``--log_samples`` output into pr1-eval import rows (``pr1-eval import --format lm-eval``).

Why: many users run everything through ``lm_eval``; importing its per-sample log makes those
runs appear in ``pr1-eval report``, the analysis and the leaderboard, graded by the same code.

What lm-eval 0.4.13 writes (``EvaluationTracker.save_results_samples``): per task, a file
``<output_path>/<model>/samples_<task>_<date>.jsonl``, one line per document with ``doc``,
``doc_id``, ``target``, ``resps`` (per request, the list of its ``repeats`` raw generations),
``filtered_resps`` and the metric values; beside it ``results_<date>.json`` holds the model
arguments, generation settings and chat template of that run.

Mapping: each repeat becomes one sample (``sample_idx`` = position among the repeats, i.e.
generation order). The raw ``resps`` are imported, never ``filtered_resps`` (a filter may have
reduced a response to an extracted answer). For the pr1_* tasks the document carries the
pr1-eval task name, problem id and gold, so imported runs line up with native ones
(``aime24``, not ``pr1_aime24``); for other generation tasks the task is the lm-eval name from
the file name, the problem id is the document's ``problem_id``/``id``/``unique_id`` (else its
``doc_id``) and the gold is ``doc["gold"]`` or lm-eval's ``target``. Every field is checked as a
``pr1-eval import`` line's is (:mod:`pr1_eval.ingest.fields`): a document without a usable gold is
stored *could not score*, never graded wrong. The results file's parts the import reads must have
lm-eval's types (a wrongly typed one is refused, naming the field); an unreadable one is skipped
with a warning.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError, describe_exception
from pr1_eval.ingest.fields import identifier, optional_text, shown, text
from pr1_eval.jsonl import iter_jsonl, unique_keys
from pr1_eval.store.run_lock import run_lock

log = logging.getLogger(__name__)

_SAMPLES_NAME = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[0-9.\-]+)\.jsonl$")
_ID_FIELDS = ("problem_id", "id", "unique_id")
_PROBLEM_FIELDS = ("problem", "question")
_PR1_DOC_FIELDS = frozenset({"task", "problem_id", "problem", "gold"})


def find_sample_files(path: str | Path) -> list[Path]:
    """The ``samples_*.jsonl`` files to import: ``path`` itself, or every one under a folder.

    A folder holding two files of the same task (lm-eval run twice into one output path) is an
    error rather than a silent merge of two runs.
    """
    path = Path(path).expanduser()
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise Pr1EvalError(f"lm-eval samples {path} not found; pass a samples_<task>_<date>.jsonl file or its folder")
    files = sorted(p for p in path.rglob("samples_*.jsonl") if p.is_file())
    if not files:
        raise Pr1EvalError(f"{path} holds no samples_*.jsonl; run lm_eval with --log_samples --output_path {path}")
    by_task: dict[str, list[Path]] = {}
    for file in files:
        match = _SAMPLES_NAME.match(file.name)
        by_task.setdefault(match.group("task") if match else file.stem, []).append(file)
    repeated = {task: paths for task, paths in by_task.items() if len(paths) > 1}
    if repeated:
        task, paths = next(iter(repeated.items()))
        listing = ", ".join(str(p) for p in paths)
        raise Pr1EvalError(f"{path} holds {len(paths)} lm-eval sample files for task {task!r} ({listing}); "
                           "these are separate runs: import one file (or one run's folder) at a time")
    return files


def _results_file(samples_file: Path) -> Path | None:
    """The ``results_<date>.json`` written by the same lm-eval run, when it is still beside the samples."""
    match = _SAMPLES_NAME.match(samples_file.name)
    if not match:
        return None
    candidates = sorted(samples_file.parent.glob(f"*_{match.group('date')}.json"))
    return candidates[0] if candidates else None


def _read_results(samples_file: Path) -> dict[str, Any]:
    path = _results_file(samples_file)
    if path is None:
        return {}
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text, object_pairs_hook=unique_keys(str(path), text))
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: bad JSON or not UTF-8
        log.warning("%s: unreadable lm-eval results file (%s); importing without its run settings", path,
                    describe_exception(exc, 120))
        return {}
    if not isinstance(data, dict):
        raise Pr1EvalError(f"{path}: expected lm-eval's results object, found a JSON {type(data).__name__}; "
                           "move the file away to import without its run settings")
    _check_results(data, path)
    return data


#: The parts of a results file the import reads, and the JSON type each must have.
_RESULTS_SHAPE = {"config": dict, "configs": dict, "versions": dict}


def _check_results(data: dict[str, Any], path: Path) -> None:
    """Refuse a results file whose parts the import reads have the wrong type, one line naming the field."""
    def wrong(name: str, value: Any, expected: str) -> Pr1EvalError:
        return Pr1EvalError(f"{path}: field {name!r} is {shown(value)}; expected {expected} (lm-eval writes it so; "
                            "move the file away to import without its run settings)")

    for name, kind in _RESULTS_SHAPE.items():
        if data.get(name) is not None and not isinstance(data[name], kind):
            raise wrong(name, data[name], "a JSON object")
    args = (data.get("config") or {}).get("model_args")
    if args is not None and not isinstance(args, (str, dict)):
        raise wrong("config.model_args", args, "a string or a JSON object")
    for task, config in (data.get("configs") or {}).items():
        if not isinstance(config, dict):
            raise wrong(f"configs.{task}", config, "a JSON object")
        repeats = config.get("repeats")
        if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1):
            raise wrong(f"configs.{task}.repeats", repeats, "a positive whole number")
        if config.get("output_type") is not None and not isinstance(config["output_type"], str):
            raise wrong(f"configs.{task}.output_type", config["output_type"], "a string")


def _model_of(results: dict[str, Any]) -> str | None:
    """The model path or hub id of an lm-eval run (``pretrained=`` of ``--model_args``)."""
    config = results.get("config") or {}
    args = config.get("model_args")
    if isinstance(args, str):
        pairs = dict(part.split("=", 1) for part in args.split(",") if "=" in part)
        args = pairs
    if isinstance(args, dict) and args.get("pretrained"):
        return str(args["pretrained"])
    name = results.get("model_name")
    return str(name) if name else None


def _first(doc: dict[str, Any], fields: tuple[str, ...]) -> Any:
    return next((doc[f] for f in fields if doc.get(f) not in (None, "")), None)


def _flatten(resps: Any, where: str) -> list[str]:
    """All raw generations of one document, in order: ``resps`` is per request, per repeat.

    A document with none (``[]``, ``[[]]``) is an error. Why not skip it: its problem would vanish
    from the run, which would then read as complete over the problems left (for a task that is no
    packaged benchmark nothing else knows how many there were). Why not store it as a wrong answer:
    no response was given to grade. lm-eval writes every repeat of a generation request, an empty
    text included (``""``, imported as it is), so a document without any is a damaged or edited log."""
    if not isinstance(resps, list):
        raise Pr1EvalError(f"{where}: 'resps' must be a list of lists of generations, got {type(resps).__name__}")
    out: list[str] = []
    for i, item in enumerate(resps):
        for j, response in enumerate(item if isinstance(item, list) else [item]):
            out.append(text(response, where, f"resps[{i}][{j}]" if isinstance(item, list) else f"resps[{i}]",
                            required=False))
    if not out:
        raise Pr1EvalError(f"{where}: 'resps' holds no generation ({shown(resps)}), so this document's problem would "
                           "vanish from the run; lm-eval writes one per repeat: run lm_eval for this task again, or "
                           "delete the line to import the run without this problem")
    return out


def _rows_of_file(file: Path, results: dict[str, Any]) -> list[dict[str, Any]]:
    match = _SAMPLES_NAME.match(file.name)
    lm_task = match.group("task") if match else file.stem
    output_type = ((results.get("configs") or {}).get(lm_task) or {}).get("output_type")
    if output_type not in (None, "generate_until"):
        raise Pr1EvalError(f"{file}: task {lm_task!r} is a {output_type} task; only generation tasks can be graded")
    model = _model_of(results)
    rows: list[dict[str, Any]] = []
    for where, sample in iter_jsonl(file, hint="is this an lm-eval samples file?"):
        if "resps" not in sample or "doc" not in sample:
            raise Pr1EvalError(f"{where}: not an lm-eval sample (needs 'doc' and 'resps'); "
                               "pass the samples_<task>_<date>.jsonl written by --log_samples")
        doc = sample["doc"] if isinstance(sample["doc"], dict) else {}
        problem_id = _first(doc, _ID_FIELDS)
        if problem_id is None:
            problem_id = sample.get("doc_id")
        if problem_id is None:
            raise Pr1EvalError(f"{where}: cannot tell the problem id (no doc problem_id/id/unique_id, no doc_id)")
        ours = doc.keys() >= _PR1_DOC_FIELDS  # a pr1_* document names its pr1-eval task
        base = {
            "_lm_task": lm_task,
            "task": text(doc["task"], where, "doc.task") if ours else lm_task,
            "problem_id": identifier(problem_id, where, "problem id"),
            "problem": optional_text(_first(doc, _PROBLEM_FIELDS), where, "doc.problem"),
            "_where": where,
        }
        if ours and doc.get("answer_policy"):  # the policy the pr1_* task graded under (lm_eval_tasks.utils)
            base["_policy"] = text(doc["answer_policy"], where, "doc.answer_policy")
        gold = doc.get("gold") if doc.get("gold") not in (None, "") else sample.get("target")
        if gold is not None or "target" in sample or "gold" in doc:  # checked with every field at import
            base["gold"] = gold
        if model:
            base["model"] = model
        for idx, response in enumerate(_flatten(sample["resps"], where)):
            rows.append({**base, "sample_idx": idx, "response": response})
    return rows


def read_lm_eval_samples(path: str | Path) -> list[dict[str, Any]]:
    """Import rows (``task, problem_id, sample_idx, response, gold, problem, model``) from lm-eval's
    ``--log_samples`` output: one ``samples_*.jsonl`` file or a folder of them (one run).

    Every repeat of a document becomes its own row; errors name file and line.
    """
    rows: list[dict[str, Any]] = []
    for file in find_sample_files(path):
        file_rows = _rows_of_file(file, _read_results(file))
        if not file_rows:
            raise Pr1EvalError(f"{file}: no samples in this file")
        rows.extend(file_rows)
    return rows


def lm_eval_run_info(path: str | Path) -> dict[str, Any]:
    """What the lm-eval run recorded about itself, for the imported run's ``run.json``."""
    files = find_sample_files(path)
    runs = []
    sampling: dict[str, Any] = {}
    for file in files:
        results = _read_results(file)
        match = _SAMPLES_NAME.match(file.name)
        lm_task = match.group("task") if match else file.stem
        task_config = (results.get("configs") or {}).get(lm_task) or {}
        if task_config.get("generation_kwargs") is not None:
            sampling[lm_task] = task_config["generation_kwargs"]
        config = results.get("config") or {}
        results_file = _results_file(file)
        runs.append({
            "samples_file": str(file),
            "results_file": str(results_file) if results_file else None,
            "lm_eval_task": lm_task,
            "lm_eval_version": results.get("lm_eval_version"),
            "model": config.get("model"),
            "model_args": config.get("model_args"),
            "repeats": task_config.get("repeats"),
            "task_version": (results.get("versions") or {}).get(lm_task),
            "chat_template_applied": None if not results else results.get("chat_template") is not None,
            "system_instruction": results.get("system_instruction"),
        })
    distinct = {json.dumps(v, sort_keys=True) for v in sampling.values()}
    info: dict[str, Any] = {"lm_eval": runs, "engine": {"backend": "lm-eval", "model": runs[0]["model"] if runs else None}}
    if len(distinct) == 1:
        info["sampling"] = next(iter(sampling.values()))
    elif sampling:
        info["sampling"] = sampling
    return info


def declared_k(rows: list[dict[str, Any]], info: dict[str, Any]) -> dict[str, int]:
    """Samples per problem each imported task was run with: lm-eval's ``repeats`` of its task
    (from the results file), for the tasks whose results file records it."""
    repeats = {run["lm_eval_task"]: run["repeats"] for run in info["lm_eval"] if run.get("repeats")}
    out: dict[str, int] = {}
    for row in rows:
        if row["_lm_task"] in repeats:
            out[row["task"]] = int(repeats[row["_lm_task"]])
    return out


def import_policy(rows: list[dict[str, Any]], asked: str | None, source: str) -> str:
    """The answer policy an lm-eval import grades under: ``asked`` when given (a warning when the
    tasks graded under another, since ``report`` then differs from lm-eval's numbers), else the one
    every pr1_* document recorded, else ``paper``. Documents that recorded different policies are
    an error: one run is graded under one policy."""
    recorded = sorted({str(row["_policy"]) for row in rows if row.get("_policy")})
    if asked is not None:
        if recorded and recorded != [asked]:
            log.warning("%s: the lm-eval tasks graded under answer policy %s; importing under %s, so report's numbers "
                        "will differ from the ones lm-eval printed", source, ", ".join(recorded), asked)
        return asked
    if len(recorded) > 1:
        raise Pr1EvalError(f"{source}: its documents were graded under different answer policies ({', '.join(recorded)}); "
                           "import each lm-eval run on its own, or choose one with --answer-policy")
    return recorded[0] if recorded else "paper"


def import_lm_eval(path: str | Path, out_dir: str | Path, *, workers: int | None = None,
                   k: int | dict[str, int] | None = None, tokenizer: str | Path | None = None,
                   replace: bool = False, answer_policy: str | None = None) -> Path:
    """Grade and store lm-eval ``--log_samples`` output as a pr1-eval run; returns the run directory.
    ``tokenizer``: a local model folder for token positions (see :mod:`pr1_eval.ingest.importer`).

    Each task's problems are the documents in its samples file; its k is ``k`` when given, else
    lm-eval's ``repeats`` for that task, else the most responses any document has. ``out_dir``
    must not hold a run (``replace``: move it aside, see :mod:`pr1_eval.store.out_folder`).
    ``answer_policy``: as :func:`pr1_eval.ingest.importer.import_rows`; ``None``: the policy the
    pr1_* tasks recorded in their documents (``--metadata pr1_answer_policy``), so ``report`` gives
    the numbers lm-eval printed, else ``paper`` (the pr1_* tasks' default, as they use the paper's prompt).
    """
    with run_lock(out_dir, "pr1-eval import"):
        return _import_locked(path, out_dir, workers=workers, k=k, tokenizer=tokenizer, replace=replace,
                              answer_policy=answer_policy)


def _import_locked(path: str | Path, out_dir: str | Path, *, workers: int | None, k: int | dict[str, int] | None,
                   tokenizer: str | Path | None, replace: bool, answer_policy: str | None) -> Path:
    from pr1_eval.ingest.importer import import_rows, unfinished_import
    from pr1_eval.store.out_folder import check_new_run_folder

    if not unfinished_import(out_dir, str(path)):
        check_new_run_folder(out_dir, command="import", replace=replace)

    rows = read_lm_eval_samples(path)
    info = lm_eval_run_info(path)
    for run in info["lm_eval"]:
        if run["lm_eval_task"].startswith("pr1_") and run["chat_template_applied"] is False:
            log.warning("%s: lm_eval ran without --apply_chat_template, so the model saw the bare prompt, "
                        "not its chat template; scores are not comparable to pr1-eval runs", run["samples_file"])
    if k is None:
        k = declared_k(rows, info) or None
    answer_policy = import_policy(rows, answer_policy, str(path))
    return import_rows(rows, out_dir, source=str(path), workers=workers, extra_run_info=info, k=k, tokenizer=tokenizer,
                       replace=replace, answer_policy=answer_policy)
