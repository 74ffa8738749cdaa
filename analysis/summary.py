"""One call from loaded runs to every table of the analysis, and the ``--json`` document.

Why a separate orchestration module: the CLI, dashboards and notebooks need the same joined
tables (structure + diversity + roles per run × task, the drift table, its trends) and must not
each re-implement the joins. Undefined numbers stay null and the row's ``notes`` say why.

Completeness (:mod:`analysis.common.completeness`): every run × task row carries ``complete`` and
``missing`` from the loader's check against ``run.json`` (the report's rule); a declared task with
no sample gets a row of nulls instead of vanishing. Incomplete cells are shown, marked, and left
out of the drift points and trends unless ``include_incomplete`` (``analyze --include-incomplete``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from analysis.common.completeness import INCLUDE_FLAG, MARK, cell_flags, limit_summary, loaded_completeness
from analysis.diversity.paths import block_diversity, pair_bound_note, scored_pairs, sibling_pairs
from analysis.efficiency.latency import LATENCY, MEASURED_COLUMNS, efficiency_tables
from analysis.engine.workers import Workers
from analysis.pipeline.scheduled import Embedder, bleu_scores, classify_in_background, conclude, start_grading_early
from analysis.runs.loader import RESPONSE_CHARS, LoadedRuns
from analysis.structure.branching import mark_unmeasurable, measured_samples, structure_stats
from analysis.structure.drift import drift_json, drift_trends
from analysis.structure.roles import (
    ROLES,
    conclusion_groups,
    consistency_groups,
    consistency_table,
    regrouped,
    role_shares,
    with_conclusions,
    with_roles,
)
from pr1_eval.records.run import RunRecord
from pr1_eval.records.sample import SAMPLE_COLUMNS

RUN_KEYS = ["run", "task"]
STEP_KEYS = ["model_family", "decoding", "task", "step"]
#: Keys of each object in ``runs`` of ``analyze --json`` (spec order).
JSON_RUN_KEYS = ("run", "task", "step", "answer_policy", "n_samples", "parallel_ratio", "blocks_per_response", "paths_per_block",
                 "first_block_rel_pos", "bleu_mean", "cosine_mean", "roles", "complete", "missing")


#: The sample columns :func:`analyze` reads (``load_runs(..., columns=ANALYSIS_COLUMNS)`` loads
#: just these: no response or problem text, whose Python strings are most of a sweep's memory).
ANALYSIS_COLUMNS = ("has_parallel", "n_blocks", "paths_per_block", "block_rel_starts", "block_char_starts",
                    "block_char_ends", "block_token_starts", "block_token_ends", "n_response_tokens", "position_unit",
                    "format_ok", "correct", "extracted_answer", RESPONSE_CHARS,
                    # the efficiency figures' lengths: stored, else measured by the decoder (analysis.efficiency.latency)
                    *(c for c in (*LATENCY, "length_unit", "grade_status", *MEASURED_COLUMNS)
                      if c in SAMPLE_COLUMNS and c != "n_response_tokens"))


@dataclass
class Analysis:
    """Every table of one analysis. ``runs``: one row per run × task; ``blocks``: the loader's
    blocks with roles and per-block diversity; ``pairs``: one row per sibling-path pair;
    ``responses``: summary consistency per response with blocks; ``drift_points``: one row per
    family × decoding × task × step (``complete``: every run × task in it is); ``drift_trends``:
    Spearman per metric; ``completeness``: :func:`analysis.common.completeness.completeness_frame`;
    ``include_incomplete``: whether incomplete cells were let into the drift."""

    runs: pd.DataFrame
    blocks: pd.DataFrame
    pairs: pd.DataFrame
    responses: pd.DataFrame
    drift_points: pd.DataFrame
    drift_trends: pd.DataFrame
    failures: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    embeddings: dict[str, Any] | None = None
    completeness: pd.DataFrame = field(default_factory=pd.DataFrame)
    include_incomplete: bool = False
    #: The efficiency figures' tables (:func:`analysis.efficiency.latency.efficiency_tables`): ``problems``,
    #: ``points`` and ``steps``; empty frames when no sample has a critical path.
    efficiency: dict[str, pd.DataFrame] = field(default_factory=dict)

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables by file stem (for writing to disk)."""
        return {"runs": self.runs, "blocks": self.blocks, "pairs": self.pairs, "responses": self.responses,
                "drift_points": self.drift_points, "drift_trends": self.drift_trends}


def analyze(loaded: LoadedRuns, embedder: Embedder | None = None, include_incomplete: bool = False,
            workers: Workers | None = None, on_table: Callable[[str, pd.DataFrame], object] | None = None) -> Analysis:
    """All tables for ``loaded``; cosine similarities only when an ``embedder`` is given; runs ×
    tasks that are incomplete against their run.json enter the drift only with ``include_incomplete``.
    ``workers`` (:mod:`analysis.engine.workers`): read the conclusions and score BLEU in those processes.
    ``on_table(name, table)``: told of the big tables (``pairs``, ``blocks``, ``responses``) as each
    is final, the very frames the :class:`Analysis` holds (``analyze`` begins their CSV then).

    The steps overlap (:mod:`analysis.pipeline.scheduled`): the workers read the paths' conclusions
    (math-verify's grading process starts meanwhile), then score BLEU; math-verify classes the
    conclusions in the grading pool while BLEU is scored; this process builds the tables that need
    neither meanwhile (the structure and efficiency tables wait for no verdict: they are built
    before the verdicts are asked for)."""
    told = on_table or (lambda name, table: None)
    path_texts = loaded.blocks["path_texts"].tolist()
    every_path = [t for texts in path_texts for t in texts]
    start_grading_early(len(every_path), workers)
    concluding = conclude(every_path, workers)
    pair_frame, pair_texts = sibling_pairs(loaded.blocks)
    scoring = bleu_scores(pair_texts, workers)
    concluded = with_conclusions(loaded.blocks, regrouped(concluding.result(), path_texts))
    heads, response_groups = consistency_groups(loaded.samples, concluded)
    role_groups = conclusion_groups(concluded)
    classing = classify_in_background([*role_groups, *response_groups])  # while BLEU is scored
    cells = loaded_completeness(loaded)
    structure = mark_unmeasurable(structure_stats(loaded.samples, by=RUN_KEYS), loaded.run_info)  # no BLEU, no verdict
    with_step = _stepped(loaded.samples, cells, include_incomplete)
    step_structure = structure_stats(with_step, by=STEP_KEYS)
    measured, unmeasured_notes = measured_samples(loaded.samples, loaded.run_info)
    efficiency = efficiency_tables(measured, cells, include_incomplete)
    bound_note = pair_bound_note(loaded.blocks)
    classes = classing.result()  # the verdicts are usually in before BLEU: their tables first
    responses = consistency_table(heads, response_groups, classes[len(role_groups):])
    told("responses", responses)
    roles = with_roles(concluded, classes[:len(role_groups)])
    pairs = scored_pairs(pair_frame, pair_texts, scoring.result(), embedder)
    told("pairs", pairs)
    blocks = block_diversity(roles, pairs)
    told("blocks", blocks)
    runs = _run_table(loaded.samples, structure, blocks, pairs, responses, embeddings_on=embedder is not None)
    runs = _with_completeness(runs, cells, include_incomplete)
    runs, policy_notes = _with_policy(runs, loaded.run_info)
    points = _drift_points(step_structure, with_step, blocks, cells, include_incomplete)
    embeddings = None
    if embedder is not None:
        embeddings = {"model": embedder.model_name, "encoded": embedder.n_encoded, "from_cache": embedder.n_from_cache,
                      "cache_dir": None if embedder.cache.directory is None else str(embedder.cache.directory)}
    return Analysis(runs=runs, blocks=blocks, pairs=pairs, responses=responses, drift_points=points,
                    drift_trends=drift_trends(points), failures=list(loaded.failures),
                    notes=[*loaded.notes, *policy_notes, *filter(None, [limit_summary(cells), bound_note]),
                           *unmeasured_notes],
                    embeddings=embeddings, completeness=cells, include_incomplete=include_incomplete,
                    efficiency=efficiency)


def _with_policy(runs: pd.DataFrame, run_info: Mapping[str, RunRecord]) -> tuple[pd.DataFrame, list[str]]:
    """``runs`` with each run's ``answer_policy`` (the reading its ``accuracy`` was graded under,
    :mod:`pr1_eval.grading.policy`), and a note when the runs were graded under different ones:
    their accuracies then count different texts as the answer and do not compare."""
    if runs.empty:
        return runs, []
    policies = runs["run"].map(lambda name: run_info[name].policy if name in run_info else None)
    out = runs.assign(answer_policy=policies)
    by_policy = out.dropna(subset=["answer_policy"]).groupby("answer_policy", sort=True)["run"].unique()
    if len(by_policy) < 2:
        return out, []
    listed = "; ".join(f"{policy}: {', '.join(map(str, names))}" for policy, names in by_policy.items())
    return out, [f"runs graded under different answer policies ({listed}): their accuracies read different text as "
                 "the answer and do not compare; `pr1-eval regrade --answer-policy` puts them under one"]


def _stepped(samples: pd.DataFrame, cells: pd.DataFrame, include_incomplete: bool) -> pd.DataFrame:
    """The samples with a checkpoint step, with ``complete`` per sample; only the complete ones
    unless ``include_incomplete`` (what the drift points are computed from)."""
    with_step = samples[samples["step"].notna()]
    with_step = with_step.assign(complete=cell_flags(with_step, cells))
    return with_step if include_incomplete else with_step[with_step["complete"]]


def _drift_points(step_structure: pd.DataFrame, with_step: pd.DataFrame, blocks: pd.DataFrame, cells: pd.DataFrame,
                  include_incomplete: bool) -> pd.DataFrame:
    """One row per family × decoding × task × step: ``step_structure`` (the structure statistics of
    ``with_step``, :func:`_stepped`) with the role shares of those steps' blocks and ``complete``."""
    if step_structure.empty:
        return step_structure
    stepped_blocks = blocks[blocks["step"].notna()]
    if not include_incomplete and not stepped_blocks.empty:
        stepped_blocks = stepped_blocks[cell_flags(stepped_blocks, cells)]
    points = step_structure.merge(role_shares(stepped_blocks, by=STEP_KEYS), on=STEP_KEYS, how="left")
    flags = with_step.groupby(STEP_KEYS, sort=False)["complete"].all().rename("complete").reset_index()
    return points.merge(flags, on=STEP_KEYS, how="left")


def _with_completeness(runs: pd.DataFrame, cells: pd.DataFrame, include_incomplete: bool) -> pd.DataFrame:
    """``runs`` with ``complete`` and ``missing`` per row, a row for every declared task without
    samples (metadata from its run, numbers null), and the mark in the row's notes."""
    keys = cells[RUN_KEYS + ["complete", "missing"]]
    if runs.empty:
        return runs
    table = runs.merge(keys, on=RUN_KEYS, how="left")
    seen = set(zip(table["run"], table["task"], strict=True))
    absent = keys[[key not in seen for key in zip(keys["run"], keys["task"], strict=True)]]
    absent = absent[absent["run"].isin(set(table["run"]))]
    if not absent.empty:  # declared, never started: a row of nulls, so the task does not vanish
        meta = table.groupby("run", sort=False)[["model", "model_family", "step", "decoding"]].first().reset_index()
        table = pd.concat([table, absent.merge(meta, on="run", how="left")], ignore_index=True)
        for count in ("n_samples", "n_pairs", "n_pairs_empty", "n_blocks_roles", "n_consistency_defined"):
            if count in table:
                table[count] = table[count].fillna(0).astype(int)
        table["step"] = table["step"].astype("Int64")
        order = {run: i for i, run in enumerate(dict.fromkeys(table["run"]))}  # beside its run's other tasks
        table = table.iloc[table["run"].map(order).argsort(kind="stable")].reset_index(drop=True)
    table["complete"] = table["complete"].fillna(True).astype(bool)
    table["missing"] = table["missing"].fillna("").astype(str)
    table["notes"] = table["notes"].fillna("").astype(str)
    how = "included in the drift on request" if include_incomplete else f"left out of the drift ({INCLUDE_FLAG} includes it)"
    table["notes"] = [note if ok else "; ".join(n for n in (f"{MARK}: {missing}; {how}", note) if n)
                      for ok, missing, note in zip(table["complete"], table["missing"], table["notes"], strict=True)]
    return table


def _run_table(samples: pd.DataFrame, structure: pd.DataFrame, blocks: pd.DataFrame, pairs: pd.DataFrame,
               responses: pd.DataFrame, embeddings_on: bool) -> pd.DataFrame:
    """``structure`` (the structure stats of ``samples`` per run × task) joined with metadata,
    diversity, roles and consistency."""
    table = structure
    if table.empty:
        return table
    meta = samples.groupby("run", sort=False)[["model", "model_family", "step", "decoding"]].first().reset_index()
    table = meta.merge(table, on="run", how="right")
    table = table.merge(_diversity_means(pairs), on=RUN_KEYS, how="left")
    table = table.merge(role_shares(blocks, by=RUN_KEYS), on=RUN_KEYS, how="left")
    table = table.merge(_consistency(responses), on=RUN_KEYS, how="left")
    table = table.merge(_disagreeing_share(samples, responses), on=RUN_KEYS, how="left")
    for count in ("n_pairs", "n_pairs_empty", "n_blocks_roles", "n_consistency_defined"):
        table[count] = table[count].fillna(0).astype(int)
    table["notes"] = [_row_notes({str(k): v for k, v in row.items()}, embeddings_on) for row in table.to_dict("records")]
    return table


def _diversity_means(pairs: pd.DataFrame) -> pd.DataFrame:
    """Mean pairwise BLEU and cosine per run × task (over pairs, as the paper reports them)."""
    columns = RUN_KEYS + ["n_pairs", "n_pairs_empty", "bleu_mean", "cosine_mean"]
    if pairs.empty:
        return pd.DataFrame(columns=columns)
    grouped = pairs.groupby(RUN_KEYS)
    out = grouped.agg(n_pairs=("bleu", "size"), bleu_mean=("bleu", "mean"), cosine_mean=("cosine", "mean"))
    out["n_pairs_empty"] = grouped["bleu"].apply(lambda s: int(s.isna().sum()))
    return out.reset_index()[columns]


def _consistency(responses: pd.DataFrame) -> pd.DataFrame:
    """Share of responses whose final answer equals the paths' majority (where defined)."""
    columns = RUN_KEYS + ["n_consistency_defined", "summary_consistency"]
    if responses.empty:
        return pd.DataFrame(columns=columns)
    defined = responses[responses["consistent"].notna()]
    grouped = defined.groupby(RUN_KEYS)["consistent"]
    out = pd.DataFrame({"n_consistency_defined": grouped.size(), "summary_consistency": grouped.mean().astype(float)})
    return responses[RUN_KEYS].drop_duplicates().merge(out.reset_index(), on=RUN_KEYS, how="left")[columns]


def _disagreeing_share(samples: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
    """Per run × task, ``disagreeing_path_share``: characters in paths whose conclusion is not the
    final answer (:mod:`analysis.structure.roles`) over all response characters of the run × task (the token-
    latency figures' "spent in paths that disagree"; in characters, path contents without tags)."""
    columns = RUN_KEYS + ["disagreeing_path_share"]
    if responses.empty or RESPONSE_CHARS not in samples or "disagreeing_path_chars" not in responses:
        return pd.DataFrame(columns=columns)
    total = samples.groupby(RUN_KEYS)[RESPONSE_CHARS].sum()
    spent = responses.assign(d=responses["disagreeing_path_chars"].fillna(0)).groupby(RUN_KEYS)["d"].sum()
    share = (spent / total.reindex(spent.index)).where(lambda v: v.notna())
    return share.rename("disagreeing_path_share").reset_index()[columns]


def _row_notes(row: dict[str, Any], embeddings_on: bool) -> str:
    """The structure notes plus the run-level reasons for nulls in the joined columns."""
    notes = [n for n in str(row.get("notes") or "").split("; ") if n]
    if _missing(row.get("step")):
        notes.append("no checkpoint step: left out of drift")
    if not row["n_pairs"] and row["n_parallel"]:
        notes.append("no block has two paths: BLEU and cosine are null")
    elif row.get("n_pairs_empty"):
        notes.append(f"{int(row['n_pairs_empty'])} path pair(s) with an empty path: their BLEU/cosine are null")
    if row["n_pairs"] and not embeddings_on:
        notes.append("embeddings off: cosine is null")
    if row["n_parallel"] and not row["n_consistency_defined"]:
        notes.append("summary consistency is null: no response has both a path majority answer and a final answer")
    if row["n_blocks_roles"] and row.get("share_undetermined") == 1.0:
        notes.append("no block has two paths reaching an answer (grader extraction): every role is undetermined")
    return "; ".join(notes)


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _clean(value: Any) -> Any:
    """JSON-safe scalar: NaN/NA -> None, numpy scalars -> Python."""
    if _missing(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def drift_notes(trends: pd.DataFrame) -> list[str]:
    """``drift TASK / block_rel_pos: NOTE`` for each block-position trend with a note. A missing note
    is None or, once pandas has filled the column, NaN (truthy): it printed ``… block_rel_pos: nan``."""
    return [f"drift {r['task']} / {r['metric']}: {r['note']}" for r in trends.to_dict("records")
            if r["metric"] == "block_rel_pos" and isinstance(r["note"], str) and r["note"]]


def to_json(analysis: Analysis) -> dict[str, Any]:
    """The ``analyze --json`` document: ``runs`` (spec keys), ``drift`` when any run has a step,
    plus ``notes`` and ``failures`` so nothing null goes unexplained."""
    runs = []
    notes: list[str] = list(analysis.notes)
    for row in analysis.runs.to_dict("records"):
        item = {key: _clean(row.get(key)) for key in JSON_RUN_KEYS if key != "roles"}
        item["roles"] = {role: _clean(row.get(f"share_{role}")) for role in ROLES}
        runs.append(item)
        if row.get("notes"):
            notes.append(f"{row['run']} / {row['task']}: {row['notes']}")
    document: dict[str, Any] = {"runs": runs, "include_incomplete": analysis.include_incomplete}
    if analysis.runs["step"].notna().any() if not analysis.runs.empty else False:
        drift = drift_json(analysis.drift_trends)
        document["drift"] = {task: {k: _clean(v) for k, v in obj.items()} for task, obj in drift.items()}
        notes += drift_notes(analysis.drift_trends)
    document["notes"] = notes
    document["failures"] = [{"path": path, "reason": reason} for path, reason in analysis.failures]
    if analysis.embeddings is not None:
        document["embeddings"] = analysis.embeddings
    return document
