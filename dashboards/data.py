"""What every page shares: the runs given on the command line, loaded once through
:func:`analysis.loader.load_runs` and kept in memory, and the sidebar's run and task filters.

Why a process-wide memo instead of ``st.cache_data``: ``cache_data`` pickles every value and
unpickles a copy on every rerun, which for 96,000 responses costs seconds and doubles memory
(and the dashboard unpickles nothing, on principle). The memo hands out the same objects to
every session; pages treat them as read-only. Keys carry :func:`analysis.loader.runs_signature`
(size, mtime and inode of every run file), so a run that is appended to or regraded is
reloaded on the next rerun, and nothing stale is ever shown.

Only runs given on the command line are ever loaded: pages select among their *names*
(query parameters included); no path from a browser is opened.

Completeness: every page reads :attr:`Context.completeness` (the loader's check against each
``run.json``, laid out by :func:`analysis.completeness.loaded_completeness`), marks an incomplete
run × task where its numbers appear (:meth:`Context.mark`, :meth:`Context.incomplete_caption`) and
leaves it out of trends and rankings unless the sidebar toggle
:data:`analysis.completeness.INCLUDE_LABEL` is on (:attr:`Context.include_incomplete`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pandas as pd
import streamlit as st

from analysis.completeness import INCLUDE_LABEL, MARK, cell_flags, loaded_completeness
from analysis.loader import LoadedRuns, load_runs, runs_signature
from dashboards.command import DEFAULT_RUNS
from dashboards.components import widget_default

_CONTEXT_KEY = "pr1_context"
T = TypeVar("T")


class Memo:
    """A small thread-safe LRU of computed values (loads and derived tables)."""

    def __init__(self, max_entries: int = 48) -> None:
        self.max_entries = max_entries
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.RLock()

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The value for ``key``, computed once (concurrent sessions wait for the first)."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]  # type: ignore[no-any-return]
            value = compute()
            self._values[key] = value
            while len(self._values) > self.max_entries:
                self._values.popitem(last=False)
            return value

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


MEMO = Memo()


def run_arguments(argv: Sequence[str]) -> tuple[str, ...]:
    """The runs given after ``--`` to the app (``./runs`` when none)."""
    return tuple(argv) or (DEFAULT_RUNS,)


def load(paths: tuple[str, ...]) -> tuple[LoadedRuns, Any]:
    """The loaded runs and their signature; the first load shows a progress bar."""
    signature = runs_signature(paths)

    def compute() -> LoadedRuns:
        bar = st.progress(0.0, text="Loading runs…")

        def progress(done: int, total: int, what: str) -> None:
            bar.progress(done / max(total, 1), text=f"Loading runs: {what} ({done}/{total})")

        loaded = load_runs(list(paths), tokenizer=None, progress=progress)
        bar.empty()
        return loaded

    return MEMO.get(("runs", paths, signature), compute), signature


@dataclass
class Context:
    """The loaded runs and the sidebar's selection, for the pages."""

    loaded: LoadedRuns
    signature: Any
    runs: list[str]
    tasks: list[str]
    all_runs: list[str] = field(default_factory=list)
    completeness: pd.DataFrame = field(default_factory=pd.DataFrame)
    include_incomplete: bool = False

    def key(self, *parts: Hashable) -> tuple[Hashable, ...]:
        return (self.signature, tuple(self.runs), tuple(self.tasks), *parts)

    def cached(self, name: str, compute: Callable[[], T], *parts: Hashable) -> T:
        """``compute()`` once per run state, selection and ``parts``."""
        return MEMO.get(self.key(name, *parts), compute)

    def samples(self) -> pd.DataFrame:
        """Samples of the selected runs and tasks (read-only)."""
        return self._selected("samples", self.loaded.samples)

    def blocks(self) -> pd.DataFrame:
        """Blocks of the selected runs and tasks (read-only)."""
        return self._selected("blocks", self.loaded.blocks)

    def _selected(self, name: str, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` cut to the selection; the frame itself when everything is selected (no copy)."""
        everything = set(self.runs) == set(self.all_runs) and set(self.tasks) == set(self.loaded.samples["task"])
        if everything:
            return frame
        return self.cached(name, lambda: frame[frame["run"].isin(self.runs) & frame["task"].isin(self.tasks)])

    def trend_samples(self) -> pd.DataFrame:
        """The selected samples that may enter trends and rankings: incomplete run × tasks are
        left out unless the sidebar's :data:`INCLUDE_LABEL` toggle is on."""
        samples = self.samples()
        if self.include_incomplete or samples.empty:
            return samples
        return self.cached("trend_samples", lambda: samples[cell_flags(samples, self.completeness)])

    def selected_completeness(self) -> pd.DataFrame:
        """The completeness rows of the selected runs and tasks."""
        frame = self.completeness
        return frame[frame["run"].isin(self.runs) & frame["task"].isin(self.tasks)]

    def mark(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` (with run and task columns) with a ``complete`` column: 'yes' or the mark."""
        bad = set(zip(*(self.completeness.loc[~self.completeness["complete"], c] for c in ("run", "task")), strict=True))
        flags = [MARK if (str(r), str(t)) in bad else "yes" for r, t in zip(frame["run"], frame["task"], strict=True)]
        return frame.assign(complete=flags)

    def incomplete_caption(self, what: str = "trends and rankings") -> str | None:
        """The sentence under a table when a selected run × task is incomplete (None when none is)."""
        rows = self.selected_completeness()
        rows = rows[~rows["complete"]]
        if rows.empty:
            return None
        treated = ("included on request" if self.include_incomplete else
                   f"left out of {what}; the sidebar toggle '{INCLUDE_LABEL}' includes them")
        return (f"{MARK}: {len(rows)} run × task(s) lack samples their run.json declares; their numbers cover only "
                f"the samples held, and they are {treated}.")

    def k(self, run: str) -> int | None:
        """The run's k from run.json, when it says."""
        record = self.loaded.run_info.get(run)
        return record.k if record is not None and record.k else None


def run_order(samples: pd.DataFrame) -> list[str]:
    """Run names ordered by model family, then step, then name (steps read left to right)."""
    meta = samples.groupby("run", sort=False)[["model_family", "step"]].first().reset_index()
    meta["step_key"] = meta["step"].astype("Float64").fillna(-1.0)
    return [str(r) for r in meta.sort_values(["model_family", "step_key", "run"])["run"]]


def _keep_valid(key: str, options: list[str]) -> None:
    """Drop remembered selections that are no longer options (a run removed, a filter changed)."""
    if key in st.session_state:
        st.session_state[key] = [v for v in st.session_state[key] if v in options]


def build_context(argv: Sequence[str]) -> Context:
    """Load the runs and render the sidebar filters; every page reads the result via :func:`context`."""
    loaded, signature = load(run_arguments(argv))
    names = run_order(loaded.samples) if not loaded.samples.empty else []
    with st.sidebar:
        _keep_valid("filter_runs", names)
        runs = st.multiselect("Runs", names, default=widget_default("filter_runs", names), key="filter_runs",
                              help="runs given on the command line; every page shows only these")
        present = loaded.samples[loaded.samples["run"].isin(runs)]["task"].unique().tolist()
        tasks = sorted(str(t) for t in present)
        _keep_valid("filter_tasks", tasks)
        chosen_tasks = st.multiselect("Tasks", tasks, default=widget_default("filter_tasks", tasks), key="filter_tasks")
        include = st.toggle(INCLUDE_LABEL, value=False, key="include_incomplete",
                            help="runs or tasks holding fewer samples than their run.json declares (a killed run, a "
                                 "task never started) are always shown, marked; this lets them into the trend tests "
                                 "and the ranking")
        completeness = loaded_completeness(loaded)
        incomplete = completeness[~completeness["complete"] & completeness["run"].isin(runs)]
        if len(incomplete):
            with st.expander(f"{MARK}: {len(incomplete)} run × task(s)"):
                for record in incomplete.to_dict("records"):
                    st.text(f"{record['run']} / {record['task']}: {record['missing']}")
        if loaded.failures:
            with st.expander(f"{len(loaded.failures)} run(s) not loaded"):
                for path, reason in loaded.failures:
                    st.text(f"{path}: {reason}")
        if loaded.notes:
            with st.expander(f"{len(loaded.notes)} note(s) on loaded runs"):
                for note in loaded.notes:
                    st.text(note)
    context = Context(loaded=loaded, signature=signature, runs=list(runs), tasks=list(chosen_tasks), all_runs=names,
                      completeness=completeness, include_incomplete=bool(include))
    st.session_state[_CONTEXT_KEY] = context
    return context


def context() -> Context:
    """The context the app built for this rerun (see :func:`build_context`)."""
    return st.session_state[_CONTEXT_KEY]  # type: ignore[no-any-return]
