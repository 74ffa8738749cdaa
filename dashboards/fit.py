"""Tables that fit the page: short run labels and metric columns split by what they measure.

Run names can be whole absolute paths (an imported run named by its checkpoint, two jobs' steps
told apart by their folders): one such name in a table's first column made the leaderboard wider
than a 1600-px window and every row four lines tall, and the token-latency columns alone pushed
the paired leaderboard to 2,800 px. So a table shows each run by the shortest label that still
tells it apart (the path components all selected runs start and end with removed, a long rest cut
in the middle) and the page lists every shortened label with its full name; and the leaderboard's
columns are split into the ranking, token latency and the remaining metrics. Pure pandas, no Streamlit, so each rule is
tested against hand-made names and rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from analysis.leaderboard.board import UNIT_LABELS

#: The longest run label a table shows (characters); longer ones are cut in the middle.
MAX_LABEL = 40
CUT = "…"
#: A removed common path start is shown as this, so a reader sees that something was left out.
SHARED = "…/"

#: Columns every split table repeats, so each one reads on its own.
KEYS = ("rank", "run", "step", "task", "complete")
#: The leaderboard's ranking table: what decides the order and the headline numbers.
RANKING = (*KEYS, "k", "n_problems", "mean@K", "ci95", "pass@K", "best@K_paper", "maj@K", "parallel_ratio",
           "tied with above")
#: The token-latency columns (the report's :mod:`pr1_eval.report.efficiency` fields), shorter names.
LATENCY = {"response_length_per_sample": "response length", "critical_path_per_sample": "critical path",
           "speedup": "speedup", "speedup_ci95": "speedup ci95", "speedup_problem_median": "median per problem",
           "speedup_problem_p90": "p90 per problem", "losing_path_share": "losing share",
           "speedup_correct": "speedup correct", "speedup_wrong": "speedup wrong"}

#: The variance of mean@K (:class:`pr1_eval.report.schema.MeanVariance`), a table of its own: four more
#: columns in the other-metrics table pushed it past the page.
VARIANCE = {"se": "se of mean@K", "variance_between": "between problems", "variance_within": "within problems",
            "required_k": "required k"}


def variance_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The key columns and the variance of mean@K (:data:`VARIANCE`, renamed); empty when no cell has it."""
    columns = [c for c in VARIANCE if filled(rows, c)]
    if not columns:
        return rows.iloc[:, 0:0]
    return rows[[c for c in KEYS if c in rows] + columns].rename(columns=VARIANCE)


def _drop_shared_parts(names: list[str]) -> dict[str, str]:
    """Each name without the path components all names start with and those they all end with
    (``/ck/exp/step100/actor`` → ``…/step100/…``), at least one component kept; ``names``
    themselves when they share no path worth removing (one name, plain names, only a leading '/')."""
    parts = [name.split("/") for name in names]
    if len(names) < 2:
        return {name: name for name in names}
    shortest = min(len(p) for p in parts)
    head = 0
    while head < shortest - 1 and len({p[head] for p in parts}) == 1:
        head += 1
    if len("/".join(parts[0][:head])) < len(SHARED) + 2:  # '/' or 'a/' alone: nothing gained
        head = 0
    tail = 0
    while head + tail < shortest - 1 and len({p[-1 - tail] for p in parts}) == 1:
        tail += 1
    return {name: (SHARED if head else "") + "/".join(p[head:len(p) - tail]) + ("/" + CUT if tail else "")
            for name, p in zip(names, parts, strict=True)}


def _cut(label: str, limit: int) -> str:
    """``label`` cut to ``limit`` characters with :data:`CUT` where text was left out: a path keeps
    its end (the checkpoint's own folders), other names a third of their start and the rest of
    their end, as a run's distinguishing part (step, seed) is usually at its end."""
    if len(label) <= limit:
        return label
    start = 0 if "/" in label else (limit - len(CUT)) // 3
    return label[:start] + CUT + label[len(label) - (limit - len(CUT) - start):]


def short_run_names(names: Iterable[str], limit: int = MAX_LABEL) -> dict[str, str]:
    """Every run name → the label a table shows: unique, at most ``limit`` characters where a cut
    keeps it unique (a name whose cut label would collide keeps its uncut one)."""
    unique = list(dict.fromkeys(str(name) for name in names))
    shared = {name: name for name in unique}
    shared.update(_drop_shared_parts([name for name in unique if "/" in name]))  # paths among plain names
    if len(set(shared.values())) < len(shared):  # cannot happen for distinct names; kept as a guard
        shared = {name: name for name in unique}
    cut = {name: _cut(label, limit) for name, label in shared.items()}
    counts = pd.Series(list(cut.values())).value_counts()
    return {name: label if counts[label] == 1 else shared[name] for name, label in cut.items()}


def shortened(labels: dict[str, str]) -> list[tuple[str, str]]:
    """(label, full name) of every run whose label differs from its name, in the labels' order."""
    return [(label, name) for name, label in labels.items() if label != name]


def relabel(frame: pd.DataFrame, labels: dict[str, str], columns: Sequence[str] = ("run", "baseline")) -> pd.DataFrame:
    """``frame`` with the run names of ``columns`` replaced by their labels (others unchanged)."""
    return frame.assign(**{c: [labels.get(str(v), str(v)) for v in frame[c]] for c in columns if c in frame})


def filled(frame: pd.DataFrame, column: str) -> bool:
    """Whether ``column`` holds any value (a list, a number other than NaN, a non-empty text)."""
    return column in frame and any(isinstance(v, list) or (not pd.isna(v) and v != "") for v in frame[column])


def length_unit(document: dict[str, Any]) -> str | None:
    """How the leaderboard document's token-latency lengths are counted ('tokens', 'characters'),
    when every cell with a critical path says one unit; None otherwise (then each run's report says)."""
    units = {cell.get("length_unit") for run in document["runs"] for cell in run["tasks"].values()
             if cell.get("critical_path_per_sample") is not None}
    return UNIT_LABELS.get(str(next(iter(units)))) if len(units) == 1 and None not in units else None


def split_leaderboard(rows: pd.DataFrame, unit: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The leaderboard rows as three tables, each with the key columns: the ranking
    (:data:`RANKING`), token latency (:data:`LATENCY`, renamed, the lengths named with ``unit``;
    empty when no cell has one) and every other metric column but the variance's
    (:func:`variance_table` shows those; nothing a cell carries is dropped; empty when none is filled)."""
    keys = [c for c in KEYS if c in rows]
    ranking = rows[[c for c in RANKING if c in rows]]
    latency_columns = [c for c in LATENCY if filled(rows, c)]
    names = {c: f"{n} ({unit})" if unit and c.endswith("_per_sample") else n for c, n in LATENCY.items()}
    latency = rows[keys + latency_columns].rename(columns=names) if latency_columns else rows.iloc[:, 0:0]
    rest = [c for c in rows.columns if c not in RANKING and c not in LATENCY and c not in VARIANCE and filled(rows, c)]
    other = rows[keys + rest] if rest else rows.iloc[:, 0:0]
    return ranking, latency, other
