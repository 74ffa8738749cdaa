"""A training job's steps as one table: a row per step run (training rollouts or validation).

Why not the loader's frames: a VERL job writes 4,096 rollouts a step, 1.2 million responses over
300 steps, far more than a page may read. Each step's run carries its summary in run.json
(:func:`pr1_eval.report.step_summary.stored_summary`, written by ``import-verl`` and repro's
rollout writer), so a curve point costs one small JSON read; a run written without one gets the
same :func:`~pr1_eval.report.step_summary.step_summary` computed from the few columns it needs
(never the responses). Every value is kept per run directory under the run's file signature
(:func:`analysis.runs.index.run_signature`), so a followed job that lands a step costs that step's
read only, and a rewritten step is read again.

What marks the curriculum's stages, from the run's ``training`` section: ``stage`` (a stage's
name: a boundary where it changes from one step to the next), ``reward_mode`` (the reward a
step was scored with: a boundary where it changes, e.g. mid-training's switch to accuracy) and
``switch_step`` (a step the writer names as the switch). Runs that record none of these get
the steps a reader types in the sidebar.

Path diversity reads responses, so it is computed on a seeded sample: at most ``max_blocks``
blocks per step (:data:`SEED`), on at most :data:`MAX_DIVERSITY_STEPS` evenly spaced steps of a
series; the page states both.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from analysis.diversity.paths import diversity
from analysis.runs.index import run_signature
from analysis.runs.loader import distinguishing_labels, finish_blocks, parse_blocks
from analysis.structure.drift import metric_trend
from pr1_eval.records.run import RunRecord
from pr1_eval.records.sample import SampleRecord
from pr1_eval.records.step_summary import STEP_SUMMARY_KEYS
from pr1_eval.records.training import TrainingSection
from pr1_eval.report.step_summary import step_summary, stored_summary
from pr1_eval.store.run_store import RunStore

T = TypeVar("T")
SEED = 0
MAX_DIVERSITY_STEPS = 60
#: What each kind of step run is called on the page.
KIND_LABELS = {"train": "training rollouts", "validation": "validation"}
#: Columns :func:`step_summary` reads, and the only ones read for it.
SUMMARY_COLUMNS = ["task", "problem_id", "sample_idx", "correct", "reward", "n_response_tokens", "has_parallel",
                   "n_blocks", "block_rel_starts", "finish_reason", "critical_path", "response_length", "length_unit"]
#: Columns the block parse needs to sample a step's blocks.
BLOCK_SOURCE_COLUMNS = ["task", "problem_id", "sample_idx", "response", "n_blocks", "block_rel_starts",
                        "block_token_starts", "block_token_ends", "position_unit"]
STEP_COLUMNS = ["job", "kind", "step", "run", "run_path", "complete", "stage", "reward_mode", "switch_step",
                "tags_kept", "position_unit", "summary_source", *STEP_SUMMARY_KEYS]
#: The curves of the Training page, in its order: summary key → label.
STEP_METRICS: dict[str, str] = {
    "reward_mean": "reward (mean)",
    "accuracy": "accuracy (mean@k)",
    "best_at_k": "best@k",
    "parallel_ratio": "parallel ratio",
    "blocks_per_response": "blocks per response",
    "first_block_rel_pos": "first <Parallel>: relative position",
    "response_tokens_mean": "response length (tokens)",
    "truncated_ratio": "cut at the length limit (share)",
    "bleu_mean": "path diversity: mean pairwise BLEU",
}


class RunCache:
    """Values computed from one run directory, kept while its file signature holds (thread-safe:
    Streamlit serves every session from one process)."""

    def __init__(self) -> None:
        self._values: dict[Path, tuple[Any, dict[Hashable, Any]]] = {}
        self._lock = threading.RLock()

    def get(self, run_dir: Path, signature: Any, key: Hashable, compute: Callable[[], T]) -> T:
        with self._lock:
            held = self._values.get(run_dir)
            if held is None or held[0] != signature:
                held = (signature, {})
                self._values[run_dir] = held
            if key not in held[1]:
                held[1][key] = compute()
            return held[1][key]  # type: ignore[no-any-return]

    def forget_others(self, keep: Sequence[Path]) -> None:
        """Drop runs no longer found (a step set aside by a re-import)."""
        with self._lock:
            for run_dir in set(self._values) - set(keep):
                del self._values[run_dir]

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


CACHE = RunCache()


def training_section(run_dir: Path, signature: Any = None) -> tuple[RunRecord, TrainingSection] | None:
    """The run's record and ``training`` section when it is a step of a training job."""
    signature = run_signature(run_dir) if signature is None else signature

    def read() -> tuple[RunRecord, TrainingSection] | None:
        record = RunStore(run_dir).read_run()
        return None if record.training is None else (record, record.training)

    return CACHE.get(run_dir, signature, "training", read)


def summary_records(run_dir: Path) -> list[SampleRecord]:
    """The run's samples with only :data:`SUMMARY_COLUMNS` filled (enough for :func:`step_summary`)."""
    table = RunStore(run_dir).read_table(columns=SUMMARY_COLUMNS)
    return [SampleRecord(**{k: v for k, v in row.items() if v is not None or k in ("correct", "reward")})
            for row in table.to_pylist()]


def step_row(run_dir: Path, signature: Any = None) -> dict[str, Any] | None:
    """One row of :data:`STEP_COLUMNS` for a step run (None when ``run_dir`` is not one)."""
    signature = run_signature(run_dir) if signature is None else signature
    found = training_section(run_dir, signature)
    if found is None:
        return None
    record, training = found

    def compute() -> dict[str, Any]:
        summary, source = stored_summary(training), "stored in run.json"
        if summary is None:
            summary = step_summary(summary_records(run_dir), tags_kept=training.measurable)
            source = "computed from the samples"
        return {"job": str(training.job or record.model.family or record.name or run_dir.parent.name),
                "kind": training.kind, "step": training.step, "run": record.name or run_dir.name,
                "run_path": str(run_dir), "complete": record.status == "complete",
                "stage": training.stage, "reward_mode": training.reward_mode, "switch_step": training.switch_step,
                "tags_kept": training.kept_tags, "position_unit": record.position_unit,
                "summary_source": source, **{key: getattr(summary, key) for key in STEP_SUMMARY_KEYS}}

    return CACHE.get(run_dir, signature, "row", compute)


def step_table(run_dirs: Sequence[Path], signatures: Sequence[Any] | None = None) -> pd.DataFrame:
    """Every step run of ``run_dirs`` as a row, sorted by job, kind and step."""
    sigs = list(signatures) if signatures is not None else [run_signature(d) for d in run_dirs]
    rows = [row for d, s in zip(run_dirs, sigs, strict=True) if (row := step_row(Path(d), s)) is not None]
    frame = _jobs_apart(pd.DataFrame(rows, columns=STEP_COLUMNS))
    return frame.sort_values(["job", "kind", "step"], kind="stable").reset_index(drop=True)


def _jobs_apart(frame: pd.DataFrame) -> pd.DataFrame:
    """Two jobs that share a name (both dumped under a folder called ``job``) imported into two run
    roots: each gets the part of its run root's path that differs (``job (exp1)``), so one job's
    steps never pool with the other's into one zig-zag series; :func:`job_notes` says so."""
    roots = [str(Path(p).parent.parent) for p in frame["run_path"]]
    renamed = list(frame["job"])
    for job in set(renamed):
        mine = sorted({r for r, j in zip(roots, frame["job"], strict=True) if j == job})
        if len(mine) > 1:
            labels = distinguishing_labels(mine)
            renamed = [f"{j} ({labels[r]})" if j == job else n for n, j, r in zip(renamed, frame["job"], roots,
                                                                                  strict=True)]
    return frame.assign(job=renamed, job_name=list(frame["job"]))


def job_notes(steps: pd.DataFrame) -> list[str]:
    """A sentence for each job name that several jobs share (:func:`_jobs_apart`)."""
    if "job_name" not in steps:
        return []
    notes = []
    for name, group in steps.groupby("job_name", sort=True):
        shown = sorted(set(group["job"]))
        if len(shown) > 1:
            notes.append(f"{len(shown)} jobs are named {name!r}: shown apart as {', '.join(shown)} (by the folder "
                         "they were imported into); pass import-verl --job NAME to name them yourself")
    return notes


def boundaries(steps: pd.DataFrame, extra: Sequence[int] = ()) -> list[tuple[int, str]]:
    """(step, label) of each stage boundary of one job: where ``stage`` or ``reward_mode`` changes
    from one recorded step to the next (marked at the first step of the new value; training
    rollouts and validation are one sequence, a step's training value first), each
    ``switch_step`` recorded, and the steps given in ``extra``."""
    marks: dict[int, list[str]] = {}
    ordered = steps.assign(_kind=steps["kind"] != "train").sort_values(["step", "_kind"], kind="stable")
    for column, word in (("stage", "stage"), ("reward_mode", "reward")):
        previous = None
        for step, value in ordered.drop_duplicates("step")[["step", column]].itertuples(index=False):
            if value is None or (isinstance(value, float) and np.isnan(value)):
                continue
            if previous is not None and value != previous:
                marks.setdefault(int(step), []).append(f"{word}: {previous} → {value}")
            previous = value
    for step in {int(s) for s in steps["switch_step"].dropna()}:
        marks.setdefault(step, []).append("reward switch (recorded)")
    for step in extra:
        marks.setdefault(int(step), []).append("marked")
    return sorted((step, "; ".join(dict.fromkeys(labels))) for step, labels in marks.items())


def parse_steps(text: str) -> list[int]:
    """Steps typed as '200' or '100, 200 250' (anything else is ignored)."""
    return sorted({int(part) for part in text.replace(",", " ").split() if part.strip().lstrip("-").isdigit()})


def step_trends(steps: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """Spearman's ρ of each metric against step per job × kind (:func:`analysis.structure.drift.metric_trend`)."""
    rows = []
    for (job, kind), group in steps.groupby(["job", "kind"], sort=True):
        for metric in metrics:
            if metric not in group:
                continue
            result = metric_trend(group, metric)
            rows.append({"job": job, "kind": KIND_LABELS.get(str(kind), str(kind)), "metric": metric,
                         "n_steps": result["n_steps"], "spearman_rho": result["spearman_rho"],
                         "p_value": result["p_value"], "p_method": result["p_method"] or "",
                         "note": result["note"] or ""})
    return pd.DataFrame(rows, columns=["job", "kind", "metric", "n_steps", "spearman_rho", "p_value", "p_method",
                                       "note"])


def diversity_steps(steps: pd.Series, limit: int = MAX_DIVERSITY_STEPS) -> set[int]:
    """At most ``limit`` evenly spaced steps of a series (its first and last among them)."""
    ordered = sorted({int(s) for s in steps})
    if len(ordered) <= limit:
        return set(ordered)
    picks = np.linspace(0, len(ordered) - 1, limit).round().astype(int)
    return {ordered[i] for i in picks}


def step_diversity(run_dir: Path, signature: Any, max_blocks: int) -> dict[str, Any]:
    """Mean pairwise BLEU of the sibling paths of at most ``max_blocks`` blocks of one step run,
    drawn with :data:`SEED` (responses with a block first, then their blocks), and the counts."""

    def compute() -> dict[str, Any]:
        table = RunStore(run_dir).read_table(columns=["n_blocks"])
        n_blocks = [int(n or 0) for n in table.column("n_blocks").to_pylist()]
        total = sum(n_blocks)
        with_blocks = [i for i, n in enumerate(n_blocks) if n > 0]
        if not with_blocks:
            return {"bleu_mean": None, "blocks_sampled": 0, "blocks_total": 0, "pairs": 0}
        chosen = sorted(random.Random(SEED).sample(with_blocks, min(max_blocks, len(with_blocks))))
        frame = RunStore(run_dir).read_table(columns=BLOCK_SOURCE_COLUMNS).take(chosen).to_pandas()
        for column in ("block_rel_starts", "block_token_starts", "block_token_ends"):
            frame[column] = [None if v is None else list(v) for v in frame[column]]
        meta = {"run": run_dir.name, "model_family": run_dir.parent.name, "step": None, "decoding": "unknown"}
        frame = frame.assign(**{k: [v] * len(frame) for k, v in meta.items()})
        blocks = finish_blocks(parse_blocks(frame)[0], frame, None)
        if len(blocks) > max_blocks:
            blocks = blocks.sample(n=max_blocks, random_state=SEED)
        pairs = diversity(blocks, None)
        # rounded: equal scores must average to equal means, or a flat series shows a "trend" of float noise
        return {"bleu_mean": round(float(pairs["bleu"].mean()), 12) if len(pairs) else None, "blocks_sampled": len(blocks),
                "blocks_total": total, "pairs": len(pairs)}

    return CACHE.get(run_dir, signature, ("diversity", max_blocks), compute)


def with_diversity(steps: pd.DataFrame, signatures: dict[str, Any], max_blocks: int) -> pd.DataFrame:
    """``steps`` with ``bleu_mean``, ``blocks_sampled`` and ``blocks_total`` on the chosen steps of
    each job × kind (:func:`diversity_steps`; runs without tags get none)."""
    out = steps.assign(bleu_mean=None, blocks_sampled=None, blocks_total=None)
    if not max_blocks or steps.empty:
        return out
    for _, group in steps.groupby(["job", "kind"], sort=False):
        chosen = diversity_steps(group["step"])
        for index, row in group.iterrows():
            if int(row["step"]) in chosen and row["tags_kept"]:
                found = step_diversity(Path(row["run_path"]), signatures[row["run_path"]], max_blocks)
                for key in ("bleu_mean", "blocks_sampled", "blocks_total"):
                    out.at[index, key] = found[key]
    return out
