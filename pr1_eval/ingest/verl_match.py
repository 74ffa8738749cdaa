"""Which problem a dumped prompt is: matched by its text against the job's data or the benchmarks.

VERL's dumps carry no problem id, data source or (in the fork) gold; the prompt text is all there
is. So the problem inside the prompt (:func:`pr1_eval.ingest.verl_formats.problem_text`, the text
after ``Problem: ``) is looked up, whitespace collapsed, in:

1. the data files the user names (``--data FILE``, parquet or JSON Lines): VERL's RL schema
   (``data_source``, ``prompt`` messages, ``reward_model.ground_truth``, ``extra_info`` with
   ``id``/``index`` and ``problem``; what ``pr1-repro data`` writes) or pr1-eval's benchmark schema
   (``id``, ``problem``, ``answer``; the task is the file's name). Task = ``data_source``, id =
   ``extra_info.id``, else ``extra_info.index``, else the row number;
2. the packaged benchmarks (:mod:`pr1_eval.inputs.tasks`), in the order aime24, aime25, amc23,
   math300_pr1, math500, gsm8k: a MATH problem in both subsets counts as math300_pr1, the paper's
   validation subset.

The first exact match wins; failing that, a prompt that is the start of exactly one known problem
(at least 48 characters: the official preprocessing cut problems at their first blank line) matches
it. A prompt matching nothing is task ``unmatched`` with id ``h-`` + the first 12 hex of the sha256
of its normalised text: the same prompt gets the same id in every step and every rerun.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.ingest.verl_formats import problem_text
from pr1_eval.inputs.tasks import load_task
from pr1_eval.jsonl import iter_jsonl

BENCHMARK_ORDER = ("aime24", "aime25", "amc23", "math300_pr1", "math500", "gsm8k")
UNMATCHED = "unmatched"
PREFIX_CHARS = 48


def normalise(text: str) -> str:
    """Whitespace collapsed: the form prompts and problems are compared in."""
    return " ".join(text.split())


def prompt_id(text: str) -> str:
    """The stable id of an unmatched problem text."""
    return "h-" + hashlib.sha256(normalise(text).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class KnownProblem:
    task: str
    problem_id: str
    gold: str | None
    version: str = ""
    source: str = ""


def _rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is the same advice
            raise Pr1EvalError(f"--data {path}: not a readable parquet file ({type(exc).__name__}); pass the "
                               "job's training or validation parquet, or a JSON Lines file") from None
        for i, row in enumerate(table.to_pylist()):
            yield f"{path}: row {i}", row
    elif path.suffix in (".jsonl", ".json"):
        yield from iter_jsonl(path, hint="pass the job's training or validation data")
    else:
        raise Pr1EvalError(f"--data {path}: expected a .parquet or .jsonl file")


def _user_content(prompt: Any) -> str | None:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        for message in prompt:
            if isinstance(message, dict) and message.get("role") == "user":
                return str(message.get("content") or "")
    return None


def data_problem(row: dict[str, Any], where: str, index: int, default_task: str) -> tuple[str, KnownProblem]:
    """(problem text, problem) of one data-file row, in either schema (module docstring)."""
    extra_value, reward_value = row.get("extra_info"), row.get("reward_model")
    extra: dict[str, Any] = extra_value if isinstance(extra_value, dict) else {}
    reward: dict[str, Any] = reward_value if isinstance(reward_value, dict) else {}
    text = extra.get("problem") or row.get("problem")
    if not text:
        content = _user_content(row.get("prompt"))
        text = None if content is None else problem_text(content)
    if not text:
        raise Pr1EvalError(f"{where}: no problem text (extra_info.problem, problem, or a user message in prompt); "
                           "--data takes VERL RL data (prompt, reward_model, extra_info) or id/problem/answer rows")
    pid = extra.get("id", extra.get("index", row.get("id", index)))
    gold = reward.get("ground_truth", row.get("answer"))
    task = str(row.get("data_source") or default_task)
    return str(text), KnownProblem(task, str(pid), None if gold is None else str(gold), source=str(where.split(":")[0]))


class ProblemIndex:
    """Problem text → :class:`KnownProblem` (see the module docstring for the order and rules)."""

    def __init__(self) -> None:
        self.exact: dict[str, KnownProblem] = {}
        self.by_prefix: dict[str, list[tuple[str, KnownProblem]]] = {}
        self.sources: list[str] = []
        self._cache: dict[str, KnownProblem | None] = {}

    def add(self, text: str, problem: KnownProblem) -> None:
        key = normalise(text)
        if key and key not in self.exact:
            self.exact[key] = problem
            self.by_prefix.setdefault(key[:PREFIX_CHARS], []).append((key, problem))

    def add_data_file(self, path: str | Path) -> int:
        path = Path(path).expanduser()
        if not path.is_file():
            raise Pr1EvalError(f"--data {path}: file not found; pass the job's training or validation data file")
        n = 0
        for n, (where, row) in enumerate(_rows(path), start=1):
            text, problem = data_problem(row, where, n - 1, path.stem)
            self.add(text, problem)
        self.sources.append(str(path))
        return n

    def add_benchmarks(self, names: Iterable[str] = BENCHMARK_ORDER) -> None:
        for name in names:
            loaded = load_task(name)
            for p in loaded.problems:
                self.add(p.problem, KnownProblem(name, p.problem_id, p.gold, loaded.spec.version, loaded.source))
            self.sources.append(loaded.source)

    def match(self, text: str) -> KnownProblem | None:
        """The problem ``text`` is, or None (cached: prompts repeat over steps)."""
        key = normalise(text)
        if key in self._cache:
            return self._cache[key]
        found = self.exact.get(key)
        if found is None and len(key) >= PREFIX_CHARS:
            starts = [p for full, p in self.by_prefix.get(key[:PREFIX_CHARS], []) if full.startswith(key)]
            found = starts[0] if len(starts) == 1 else None
        self._cache[key] = found
        return found
