"""The layout of a training job's step runs, and the one helper that builds a step's run record.

Why here: two writers store a training job's steps as runs, ``pr1-eval import-verl`` (from the
job's dumps, :mod:`pr1_eval.ingest.verl_import`) and repro's rollout writer (while the job runs,
:mod:`repro.rollout_runs`), and every reader (the Training page, the leaderboard of validation
steps, the nano checks) takes both. What they share was the importer's: repro imported its
folder names, its task declaration and its supersede. It lives below both now, so neither writer
reaches into the other and the layout cannot drift between them:

* ``ROOT/train/step-000120`` and ``ROOT/val/step-000120`` (:func:`step_run_dir`), a run named
  ``<job>-<train|val>-step-000120`` (:func:`step_run_name`), ``model.step`` the step and
  ``model.family`` the job;
* a step run replaced by a newer one (a changed dump, a later attempt of the job) moved, never
  deleted, to ``ROOT.superseded/<train|val>/`` (:func:`supersede`);
* once its samples are known: each task's problems and k (:func:`declared_tasks`), the run's k
  when every task has the same, the samples' position unit, and the step's summary
  (:func:`pr1_eval.report.step_summary.step_summary`) in ``training.summary``
  (:func:`with_samples`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pr1_eval.records.provenance import now_iso, package_versions
from pr1_eval.records.run import ModelInfo, RunRecord, task_entry
from pr1_eval.records.sample import SampleRecord
from pr1_eval.records.training import KIND_DIRS, TrainingSection
from pr1_eval.report.step_summary import step_summary
from pr1_eval.store.out_folder import aside_path, move_aside

#: What a run root's name is suffixed with for the folder superseded step runs move to.
SUPERSEDED = ".superseded"
#: A task's (version, source) in its ``tasks`` entry, by task name.
TaskOrigin = Callable[[str], tuple[str | None, str | None]]


def step_run_dir(root: Path, kind: str, step: int) -> Path:
    """``ROOT/train/step-000120``: the run of one step of one kind."""
    return root / KIND_DIRS[kind] / f"step-{step:06d}"


def step_run_name(job: str | None, kind: str, step: int) -> str:
    """``<job>-train-step-000120``: the run's name."""
    return f"{job}-{KIND_DIRS[kind]}-step-{step:06d}"


def supersede(out: Path, root: Path, kind: str) -> Path:
    """Move the run at ``out`` to ``ROOT.superseded/<kind>/<name>.replaced-<time>`` (never delete it),
    a folder run discovery skips (:mod:`pr1_eval.store.discovery`); its record says when."""
    target_dir = Path(str(root.resolve()) + SUPERSEDED) / KIND_DIRS[kind]
    return move_aside(out, aside_path(target_dir, out.name))


def declared_tasks(records: list[SampleRecord]) -> dict[str, tuple[list[str], int]]:
    """task → (problem ids in file order, k = the most common number of samples a problem has).

    Why the most common and not the most: a training batch can hold one problem twice (DAPO repeats
    problems), and its two groups are pooled; with k = the most, every other problem of the step
    would read as incomplete. Ties go to the larger count."""
    held: dict[str, dict[str, int]] = {}
    for r in records:
        problems = held.setdefault(r.task, {})
        problems[r.problem_id] = problems.get(r.problem_id, 0) + 1
    declared = {}
    for task, problems in held.items():
        counts = Counter(problems.values())
        declared[task] = (list(problems), max(counts, key=lambda n: (counts[n], n)))
    return declared


def step_record(training: TrainingSection, *, status: str, engine: dict[str, Any],
                decoding: dict[str, Any]) -> RunRecord:
    """The run record of one step before its samples are declared: name, model, provenance, section."""
    return RunRecord(name=step_run_name(training.job, training.kind, training.step), status=status,
                     model=ModelInfo(step=training.step, family=training.job), engine=engine, decoding=decoding,
                     packages=package_versions(), started_at=now_iso(), training=training)


def with_samples(record: RunRecord, records: list[SampleRecord], origin: TaskOrigin) -> RunRecord:
    """``record`` declaring its samples: each task's problems and k (version and source from
    ``origin``), the run's k when every task has the same, the samples' position unit, and the
    step's summary computed from them (structure only when the tags were kept)."""
    if record.training is None:
        raise ValueError(f"{record.name}: not a training step's run (no training section)")
    declared = declared_tasks(records)
    ks = {k for _, k in declared.values()}
    tasks = {}
    for task, (ids, k) in declared.items():
        version, source = origin(task)
        tasks[task] = task_entry(ids, k, version=version, source=source, data_hash=None)
    summary = step_summary(records, tags_kept=record.training.kept_tags)
    return replace(record, tasks=tasks, k=ks.pop() if len(ks) == 1 else None,
                   position_unit=records[0].position_unit if records else None,
                   training=replace(record.training, summary=summary))
