"""Structure statistics: how often a model branches, how much, and where (claim a).

Everything is computed from the samples frame's stored structure fields, grouped by any keys
(run × task for the report, family × decoding × task × step for drift), so the two tables can
never disagree about what "parallel ratio" means. A statistic with no data behind it (no
blocks, nothing graded) is null and the row's ``notes`` say why, never 0 and never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np
import pandas as pd

from pr1_eval.records.run import NOT_MEASURABLE, RunRecord
from pr1_eval.report.run_report import parallel_mask
from pr1_eval.stats.metrics import parallel_ratio

#: Columns of :func:`structure_stats` (after the group keys).
STRUCTURE_COLUMN_DOCS: dict[str, str] = {
    "n_samples": "Responses in the group.",
    "n_parallel": "Responses with at least one <Parallel> block.",
    "parallel_ratio": "n_parallel / n_samples (pr1_eval.stats.metrics.parallel_ratio, the report's).",
    "blocks_per_response": "Mean number of blocks over all responses (0 for responses without one).",
    "blocks_per_parallel_response": "Mean number of blocks over responses that have one; null when none do.",
    "paths_per_block": "Total paths / total blocks; null without blocks.",
    "in_block_share": "Response length inside <Parallel>…</Parallel> / response length, pooled over responses.",
    "in_block_unit": "'token' or 'char': the unit of in_block_share (tokens only when every response has them).",
    "first_block_rel_pos": "Mean relative position of each response's first <Parallel>; null without blocks.",
    "block_rel_pos": "Mean relative position over all blocks; null without blocks.",
    "position_unit": "'token', 'char' or 'mixed': the unit of the relative positions (null without blocks).",
    "format_ok_ratio": "Share of responses passing the strict format check.",
    "n_scored": "Responses with a grading verdict (correct not null).",
    "accuracy": "Share correct among scored responses; null when none are scored.",
    "accuracy_with_block": "Accuracy among scored responses with a block; null when there are none.",
    "accuracy_without_block": "Accuracy among scored responses without a block; null when there are none.",
    "notes": "Why any of the above is null, or other caveats ('; '-separated).",
}
STRUCTURE_COLUMNS: tuple[str, ...] = tuple(STRUCTURE_COLUMN_DOCS)


def structure_stats(samples: pd.DataFrame, by: Sequence[str] = ("run", "task")) -> pd.DataFrame:
    """One row per group of ``by`` with the :data:`STRUCTURE_COLUMNS`."""
    keys = list(by)
    if samples.empty:
        return pd.DataFrame(columns=keys + list(STRUCTURE_COLUMNS))
    rows = []
    for key, group in samples.groupby(keys, sort=True, dropna=False):
        values = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(keys, values, strict=True)), **group_stats(group)})
    return pd.DataFrame(rows, columns=keys + list(STRUCTURE_COLUMNS))


#: The columns that count tags: they mean nothing for a run whose tags were stripped.
TAG_COLUMNS = ("n_parallel", "parallel_ratio", "blocks_per_response", "blocks_per_parallel_response",
               "paths_per_block", "in_block_share", "first_block_rel_pos", "block_rel_pos", "position_unit",
               "format_ok_ratio", "accuracy_with_block", "accuracy_without_block")


def mark_unmeasurable(stats: pd.DataFrame, run_info: Mapping[str, RunRecord], fill: Any = None) -> pd.DataFrame:
    """``stats`` with the :data:`TAG_COLUMNS` of runs whose tags were stripped
    (:attr:`RunRecord.structure_measurable` false: a VERL 0.9.1 dump) set to ``fill`` (None for
    JSON and CSV, the display's 'n/a' on a page; the accuracy split stays None, it is plotted) and
    their notes saying why. Counted as they are, those runs would read parallel ratio 0.0 with
    "no parallel blocks", as if the model never branched."""
    runs = {name for name, record in run_info.items() if not record.structure_measurable}
    rows = stats["run"].isin(runs) if "run" in stats and runs else None
    if rows is None or not rows.any():
        return stats
    out = stats.astype({column: object for column in TAG_COLUMNS if column in stats})
    for column in TAG_COLUMNS:
        if column in out:
            out.loc[rows, column] = None if column.startswith("accuracy_") else fill
    kept = [[n for n in str(note or "").split("; ") if n and "block" not in n] for note in out.loc[rows, "notes"]]
    said = [run_info[str(run)].not_measured if str(run) in run_info else NOT_MEASURABLE for run in out.loc[rows, "run"]]
    out.loc[rows, "notes"] = ["; ".join([f"structure {why}", *notes]) for why, notes in zip(said, kept, strict=True)]
    return out


def unmeasured_runs(run_info: Mapping[str, RunRecord]) -> dict[str, str]:
    """Each run whose structure was not measured (stripped tags, an answers-only import), with what
    its tables show instead (:attr:`RunRecord.not_measured`)."""
    return {name: record.not_measured for name, record in run_info.items() if not record.structure_measurable}


def measured_samples(samples: pd.DataFrame, run_info: Mapping[str, RunRecord]) -> tuple[pd.DataFrame, list[str]]:
    """``samples`` without the runs whose structure was not measured, and a note naming each left out.
    Why: their critical path is their whole length (no block found), so a token-latency figure of
    them reads speedup 1.00x, "never branches", where nothing was measured."""
    unmeasured = unmeasured_runs(run_info)
    if not unmeasured or "run" not in samples:
        return samples, []
    present = [name for name in unmeasured if name in set(samples["run"].astype(str))]
    notes = [f"token latency of {name}: {unmeasured[name]}" for name in present]
    return samples[~samples["run"].astype(str).isin(present)], notes


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def group_stats(group: pd.DataFrame) -> dict[str, Any]:
    """The statistics of one group of samples (see :data:`STRUCTURE_COLUMN_DOCS`)."""
    notes: list[str] = []
    n = len(group)
    has_block = parallel_mask(group)  # the report's count: one definition of the parallel ratio
    n_blocks = group["n_blocks"].fillna(0).astype(int)
    rel_lists = [list(r or []) for r in group["block_rel_starts"]]
    total_paths = sum(sum(p or []) for p in group["paths_per_block"])
    all_rel = [x for r in rel_lists for x in r]
    if n == 1:
        notes.append("single sample: ratios are 0 or 1")
    if not has_block.any():
        notes.append("no parallel blocks: paths_per_block and positions are null")
    share, share_unit = in_block_share(group)
    branching = branching_stats(group)
    unit = branching["position_unit"]
    if unit == "mixed":
        notes.append("positions mix token and character units")
    accuracy = _accuracy(group, has_block, notes)
    return {
        "n_samples": n,
        "n_parallel": int(has_block.sum()),
        "parallel_ratio": branching["parallel_ratio"],
        "blocks_per_response": float(n_blocks.mean()),
        "blocks_per_parallel_response": _mean(n_blocks[has_block].tolist()),
        "paths_per_block": total_paths / int(n_blocks.sum()) if n_blocks.sum() else None,
        "in_block_share": share,
        "in_block_unit": share_unit,
        "first_block_rel_pos": branching["first_block_rel_pos"],
        "block_rel_pos": _mean(all_rel),
        "position_unit": unit,
        "format_ok_ratio": float(group["format_ok"].astype(bool).mean()),
        **accuracy,
        "notes": "; ".join(notes),
    }


def branching_stats(group: pd.DataFrame) -> dict[str, Any]:
    """``parallel_ratio``, ``first_block_rel_pos`` and ``position_unit`` of one group, as
    :func:`group_stats` gives them: the statistics that need no response text (the leaderboard's)."""
    has_block = parallel_mask(group)
    n_blocks = group["n_blocks"].fillna(0).astype(int)
    units = {str(u) for u, nb in zip(group["position_unit"], n_blocks, strict=True) if nb}
    return {"parallel_ratio": parallel_ratio(int(has_block.sum()), len(group)),
            "first_block_rel_pos": _mean([r[0] for r in group["block_rel_starts"] if r is not None and len(r)]),
            "position_unit": None if not units else (units.pop() if len(units) == 1 else "mixed")}


def _accuracy(group: pd.DataFrame, has_block: pd.Series, notes: list[str]) -> dict[str, Any]:
    """Accuracy overall, with and without a block, over scored responses only."""
    scored = group["correct"].notna()
    correct = group["correct"].astype("boolean")
    if not scored.any():
        notes.append("no graded responses: accuracy is null")

    def share(mask: pd.Series) -> float | None:
        selected = correct[mask & scored]
        return float(selected.astype(bool).mean()) if len(selected) else None

    with_block, without = share(has_block), share(~has_block)
    if scored.any() and without is None:
        notes.append("every scored response has a block: accuracy_without_block is null")
    if scored.any() and with_block is None:
        notes.append("no scored response has a block: accuracy_with_block is null")
    return {"n_scored": int(scored.sum()), "accuracy": share(pd.Series(True, index=group.index)),
            "accuracy_with_block": with_block, "accuracy_without_block": without}


def in_block_share(group: pd.DataFrame) -> tuple[float | None, str]:
    """Share of response length inside blocks, pooled (Σ inside / Σ length), and its unit;
    null when every response is empty.

    Tokens when every response has a token count and every block a token position; otherwise
    characters for all responses, so one unit is never divided by another.
    """
    token_ok = group["n_response_tokens"].notna().all() and all(
        (not nb) or (ts is not None and len(ts) == nb)
        for nb, ts in zip(group["n_blocks"].fillna(0).astype(int), group["block_token_starts"], strict=True)
    )
    lengths: Any
    if token_ok:
        starts_of, ends_of, lengths = group["block_token_starts"], group["block_token_ends"], group["n_response_tokens"]
    else:  # a projected load (analysis.runs.loader.RESPONSE_CHARS) holds the lengths, not the texts
        starts_of, ends_of = group["block_char_starts"], group["block_char_ends"]
        lengths = group["response_chars"] if "response_chars" in group else [
            len(r) if isinstance(r, str) else 0 for r in group["response"]]
    inside = _inside_length(list(starts_of), list(ends_of))
    total = sum(int(length) for length in lengths)
    return (inside / total if total else None), ("token" if token_ok else "char")


def _inside_length(starts_of: list[Any], ends_of: list[Any]) -> int:
    """Σ (end - start) over every block of every response (a response's starts and ends paired in
    order, the longer list cut to the shorter): over two flat integer arrays when each response has
    as many ends as starts (a sweep's 96,000 responses: a Python loop per response was most of the
    group statistics' time), else response by response."""
    starts_of = [s or [] for s in starts_of]
    ends_of = [e or [] for e in ends_of]
    if list(map(len, starts_of)) != list(map(len, ends_of)):
        return sum(sum(int(e) - int(s) for s, e in zip(starts, ends, strict=False))
                   for starts, ends in zip(starts_of, ends_of, strict=True))
    starts = np.fromiter(map(int, chain.from_iterable(starts_of)), dtype=np.int64)
    ends = np.fromiter(map(int, chain.from_iterable(ends_of)), dtype=np.int64)
    return int((ends - starts).sum())
