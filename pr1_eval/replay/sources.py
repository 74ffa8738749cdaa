"""What a replay reads: an imported run (one per task) or a trajectory file, as typed questions.

A run qualifies when its samples carry probe answers and token counts (``pr1-eval import --format
parallel-probe``, or a JSON Lines import with ``probe_answers``/``probe_interval``/
``n_response_tokens``). A run's branches are its samples in ``sample_idx`` order, which the import
keeps equal to the file's branch order, so replaying the run and replaying the file give the same
numbers (a test holds them equal). A sample graded *no answer* replays as ``"ERR"``, the authors'
mark for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.ingest.parallel_probe import ProbeBranch, ProbeQuestion, answer_of, check_probe_count, read_parallel_probe

#: The columns a run must fill for a replay.
NEEDED = ("task", "problem_id", "sample_idx", "gold", "response", "n_response_tokens", "probe_answers",
          "probe_interval")


@dataclass(frozen=True)
class ReplaySource:
    """One task's questions, with where they came from (for tables and run.json-like records)."""

    label: str
    model: str
    task: str
    questions: tuple[ProbeQuestion, ...]


def questions_from_rows(rows: list[dict[str, Any]], where: str) -> tuple[ProbeQuestion, ...]:
    """The run's problems (by id) as questions, each problem's samples in ``sample_idx`` order."""
    by_problem: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: (str(r["problem_id"]), int(r["sample_idx"]))):
        by_problem.setdefault(str(row["problem_id"]), []).append(row)
    questions = []
    for index, (pid, group) in enumerate(by_problem.items()):
        missing = sum(r["probe_answers"] is None or r["n_response_tokens"] is None or r["probe_interval"] is None
                      for r in group)
        if missing:
            raise Pr1EvalError(f"{where}: problem {pid}: {missing} sample(s) have no probe answers or token counts, "
                               "which a replay needs; import probed trajectories (pr1-eval import --format "
                               "parallel-probe)")
        branches = tuple(ProbeBranch(tuple(str(a) for a in r["probe_answers"]), int(r["n_response_tokens"]),
                                     answer_of(str(r["response"]))) for r in group)
        interval = int(group[0]["probe_interval"])
        for r, branch in zip(group, branches, strict=True):
            check_probe_count(branch, interval, f"{where}: problem {pid} sample {r['sample_idx']}")
        questions.append(ProbeQuestion(index=index, question=pid, gold=str(group[0]["gold"]),
                                       probe_interval=interval, branches=branches))
    return tuple(questions)


def sources_of_run(run_dir: Path) -> list[ReplaySource]:
    """One source per task of an imported, probed run."""
    from pr1_eval.store.run_store import RunStore

    store = RunStore(run_dir)
    if not store.exists():
        raise Pr1EvalError(f"{run_dir}: no run.json here; pass a run folder or a trajectory file (MODEL__TASK.json)")
    model = store.read_run().model.path or "unknown"
    rows = store.read_table(columns=list(NEEDED)).to_pylist()
    if not rows:
        raise Pr1EvalError(f"{run_dir}: the run holds no samples")
    by_task: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_task.setdefault(str(row["task"]), []).append(row)
    return [ReplaySource(label=f"{run_dir.name}/{task}", model=model, task=task,
                         questions=questions_from_rows(task_rows, str(run_dir)))
            for task, task_rows in sorted(by_task.items())]


def load_sources(paths: list[str]) -> list[ReplaySource]:
    """Every task of every path: a run folder, or a Parallel-Probe trajectory file."""
    sources: list[ReplaySource] = []
    for text in paths:
        path = Path(text).expanduser()
        if path.is_dir():
            sources.extend(sources_of_run(path))
        elif path.is_file():
            probe = read_parallel_probe(path)
            sources.append(ReplaySource(label=path.name, model=probe.model, task=probe.task,
                                        questions=probe.questions))
        else:
            raise Pr1EvalError(f"{text}: no such file or folder; pass a run folder or a trajectory file")
    return sources
