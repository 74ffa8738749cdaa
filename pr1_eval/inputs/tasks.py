"""The task registry (plain data) and the loader that turns a task into problems.

A task is a name, a version, a file in the benchmark folder, the fields to read, and the
Hugging Face hub dataset behind it. Loading validates every row and names file and line on a
malformed one; the sha256 of the data goes into ``run.json``.

Where a task's data comes from (``source``; ``--data-source`` on the command line):

- ``auto`` (default): ``--data-dir``, else ``$PR1_DATA_DIR``, else the copy packaged with
  pr1-eval (all six tasks ship in ``pr1_eval/data/benchmarks``, checked against their sha256),
  else the hub (a registered task whose file is not packaged);
- ``packaged``: the packaged copy, ignoring ``$PR1_DATA_DIR`` (a run comparable with anyone's);
- ``hub``: the hub dataset below, converted as described (needs network access).

Hub sources (documented here and in the README):

- aime24: ``HuggingFaceH4/aime_2024`` (split train)
- aime25: ``math-ai/aime25`` (split test)
- amc23: ``math-ai/amc23`` (split test; the problem is in ``question``)
- math500 / math300_pr1: ``HuggingFaceH4/MATH-500`` (split test); math300_pr1 keeps the rows
  whose answer, with ``_`` removed, is an integer (the paper's rule, 316 rows)
- gsm8k: ``openai/gsm8k`` (config main, split test; the answer follows ``####``)

Decision: math300_pr1's gold is the MATH answer (``math_answer``), not the paper's ground
truth, which dropped the base subscript of 5 answers (e.g. ``52_8`` became ``528``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.inputs.paths import PACKAGED_PREFIX, is_packaged, resolve_data_dir, verified_packaged_file
from pr1_eval.jsonl import iter_jsonl
from pr1_eval.protocol.paper_settings import PAPER_K

_GSM8K_ANSWER = re.compile(r"####\s*(.+)$", re.S)
_INTEGER = re.compile(r"-?\d+")


def gsm8k_final_number(answer: str) -> str:
    """GSM8K's gold is a worked solution ending ``#### 42``; the gold answer is what follows ``####``."""
    match = _GSM8K_ANSWER.search(answer)
    return (match.group(1) if match else answer).replace(",", "").strip()


def is_integer_answer(answer: str) -> bool:
    """The paper's MATH300 rule: answers that are integers once a base subscript's ``_`` is removed."""
    return bool(_INTEGER.fullmatch(answer.replace("_", "")))


@dataclass(frozen=True)
class HubSource:
    """Where a task's rows live on the hub, and the task's own rules for reading them.

    ``gold_transform`` turns the hub's answer field into the gold answer; ``keep_row`` decides
    from that gold whether a row belongs to the task (e.g. MATH300 is MATH-500's integer answers).
    They live on the spec so the loader has no per-task branches.
    """

    path: str
    split: str
    name: str | None = None
    id_field: str | None = None
    problem_field: str = "problem"
    answer_field: str = "answer"
    gold_transform: Callable[[str], str] | None = None
    keep_row: Callable[[str], bool] | None = None


@dataclass(frozen=True)
class TaskSpec:
    """One benchmark. ``file`` is relative to the benchmark folder.

    ``paper_k``: the samples per problem behind the paper's number for this task (Mean@16 and
    Pass@16 on AIME24, AIME25 and AMC23; Mean@1 on its MATH300 subset), which is also how often its
    validation file repeats each problem; None for a task the paper's table does not report. A
    property of the task, not of a run: ``-k`` still chooses what a run samples.
    """

    name: str
    version: str
    file: str
    description: str
    hub: HubSource
    id_field: str = "id"
    problem_field: str = "problem"
    answer_field: str = "answer"
    paper_k: int | None = None


TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec("aime24", "1", "aime24.jsonl", "AIME 2024 I+II (30)", HubSource("HuggingFaceH4/aime_2024", "train", id_field="id"), paper_k=PAPER_K),
        TaskSpec("aime25", "1", "aime25.jsonl", "AIME 2025 I+II (30)", HubSource("math-ai/aime25", "test", id_field="id"), paper_k=PAPER_K),
        TaskSpec("amc23", "1", "amc23.jsonl", "AMC 2023 (40, integer-answer form)", HubSource("math-ai/amc23", "test", id_field="id", problem_field="question"), paper_k=PAPER_K),
        TaskSpec("math500", "1", "math500.jsonl", "MATH-500 (500)", HubSource("HuggingFaceH4/MATH-500", "test", id_field="unique_id")),
        TaskSpec("math300_pr1", "1", "math300_pr1.jsonl", "The paper's 316-problem integer-answer MATH subset", HubSource("HuggingFaceH4/MATH-500", "test", id_field="unique_id", keep_row=is_integer_answer), answer_field="math_answer", paper_k=1),
        TaskSpec("gsm8k", "1", "gsm8k_test.jsonl", "GSM8K test (1319)", HubSource("openai/gsm8k", "test", name="main", problem_field="question", gold_transform=gsm8k_final_number)),
    )
}


@dataclass(frozen=True)
class Problem:
    task: str
    problem_id: str
    problem: str
    gold: str


@dataclass(frozen=True)
class LoadedTask:
    spec: TaskSpec
    problems: list[Problem]
    source: str
    data_hash: str
    n_available: int | None = None  # problems before ``limit`` (recorded so a report can say "first 4 of 30")


def get_task(name: str) -> TaskSpec:
    """The registered task, or an error listing the known ones."""
    if name not in TASKS:
        known = ", ".join(sorted(TASKS))
        raise Pr1EvalError(f"unknown task {name!r}; known tasks: {known}")
    return TASKS[name]


def parse_task_list(text: str) -> list[str]:
    """``"aime24,amc23"`` → validated names (``all`` = every task except gsm8k)."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if names == ["all"]:
        return [n for n in TASKS if n != "gsm8k"]
    for name in names:
        get_task(name)
    if not names:
        raise Pr1EvalError("no task given; pass e.g. --tasks aime24,amc23")
    return names


def _require_str(row: dict[str, Any], fieldname: str, where: str) -> str:
    value = row.get(fieldname)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise Pr1EvalError(f"{where}: missing or empty field {fieldname!r}; each row needs id, problem and answer")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def read_jsonl_problems(path: Path, spec: TaskSpec) -> list[Problem]:
    """Validated problems from a JSONL file; a malformed row names file and line."""
    if not path.is_file():
        raise Pr1EvalError(
            f"task {spec.name!r}: data file {path} not found; point --data-dir (or PR1_DATA_DIR) "
            f"at a folder holding {spec.file}, or leave both unset to use the packaged copy"
        )
    problems: list[Problem] = []
    seen: set[str] = set()
    for where, row in iter_jsonl(path, hint="fix or remove that line"):
        pid = _require_str(row, spec.id_field, where)
        if pid in seen:
            raise Pr1EvalError(f"{where}: duplicate problem id {pid!r}; ids must be unique")
        seen.add(pid)
        problems.append(Problem(spec.name, pid, _require_str(row, spec.problem_field, where), _require_str(row, spec.answer_field, where)))
    return problems


def _hub_rows(spec: TaskSpec) -> list[Problem]:
    """Problems from the hub dataset behind ``spec`` (requires network access to the hub)."""
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - datasets is a core dependency
        raise Pr1EvalError("loading from the hub needs the `datasets` package") from exc
    hub = spec.hub
    try:
        data = datasets.load_dataset(hub.path, hub.name, split=hub.split)
    except Exception as exc:
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise Pr1EvalError(
            f"task {spec.name!r}: the hub dataset {hub.path} could not be loaded ({type(exc).__name__}: {first_line}); "
            f"if the hub is unreachable from here, pass --data-dir to a folder holding {spec.file}"
        ) from None
    problems = []
    for i, row in enumerate(data):
        answer = str(row[hub.answer_field]).strip()
        if hub.gold_transform is not None:
            answer = hub.gold_transform(answer)
        if hub.keep_row is not None and not hub.keep_row(answer):
            continue
        if isinstance(row.get(hub.answer_field), float) and float(answer).is_integer():
            answer = str(int(float(answer)))
        pid = str(row[hub.id_field]) if hub.id_field and hub.id_field in row else f"{spec.name}-{i}"
        problems.append(Problem(spec.name, pid, str(row[hub.problem_field]), answer))
    return problems


def problems_hash(problems: list[Problem]) -> str:
    """sha256 of the canonical JSON of (id, problem, gold): identical data ⇔ identical hash."""
    digest = hashlib.sha256()
    for p in problems:
        digest.update(json.dumps([p.problem_id, p.problem, p.gold], ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()


DATA_SOURCES = ("auto", "packaged", "hub")


def _packaged_problems(spec: TaskSpec) -> tuple[list[Problem], str]:
    relpath = f"benchmarks/{spec.file}"
    return read_jsonl_problems(verified_packaged_file(relpath), spec), PACKAGED_PREFIX + relpath


def _problems_from(spec: TaskSpec, data_dir: str | Path | None, source: str) -> tuple[list[Problem], str]:
    """The problems and a label of where they came from, following ``source`` (see the module doc)."""
    if source not in DATA_SOURCES:
        raise Pr1EvalError(f"unknown data source {source!r}; choose one of {', '.join(DATA_SOURCES)}")
    if data_dir and source != "auto":
        raise Pr1EvalError(f"--data-dir and --data-source {source} exclude each other; drop one of them")
    folder = resolve_data_dir(data_dir) if source == "auto" else None
    if folder is not None:
        path = folder / spec.file
        return read_jsonl_problems(path, spec), str(path)
    if source != "hub" and is_packaged(f"benchmarks/{spec.file}"):
        return _packaged_problems(spec)
    if source == "packaged":
        raise Pr1EvalError(f"task {spec.name!r} is not packaged with pr1-eval; use --data-source hub or --data-dir")
    return _hub_rows(spec), f"hub:{spec.hub.path}"


def load_task(
    name: str, data_dir: str | Path | None = None, limit: int | None = None, source: str = "auto"
) -> LoadedTask:
    """Load a registered task: from ``data_dir`` / ``$PR1_DATA_DIR``, else the packaged copy, else
    the hub (``source`` = ``auto``); ``packaged`` or ``hub`` forces one of them.

    ``limit`` keeps the first N problems; the hash covers the problems actually used.
    """
    spec = get_task(name)
    problems, origin = _problems_from(spec, data_dir, source)
    available = len(problems)
    if limit is not None:
        problems = problems[:limit]
    return LoadedTask(spec, problems, origin, problems_hash(problems), available)
