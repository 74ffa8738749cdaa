"""What every page shares: the runs given on the command line, loaded once through
:func:`analysis.runs.loader.load_runs` and kept in memory, and the sidebar's run and task filters.

Why a process-wide memo instead of ``st.cache_data``: ``cache_data`` pickles every value and
unpickles a copy on every rerun, which for 96,000 responses costs seconds and doubles memory
(and the dashboard unpickles nothing, on principle). The memo hands out the same objects to
every session; pages treat them as read-only. Keys carry :func:`analysis.runs.index.runs_signature`
(size, mtime and inode of every run file), so a run that is appended to or regraded is
reloaded on the next rerun, and nothing stale is ever shown.

Only runs given on the command line are ever loaded: pages select among their *names*
(query parameters included); no path from a browser is opened.

Loaded run by run: each run's frames are kept under its own signature, so when one run changes
(a followed job lands a step, a run is regraded) only that run is read again and the rest are
reused; the merged frames of the previous state are dropped with everything derived from them.

Training-step runs (a ``training`` section with a kind and a step, one run per step of a job:
:mod:`analysis.runs.steps`) are indexed from their run.json for the Training page. They
join the loaded frames too (so the other pages and the trace viewer see them) while all of them
together hold at most :data:`TRAINING_LOAD_LIMIT` samples; a real job's 4,096 rollouts × 300
steps are far beyond what a page can hold, and then only the Training page shows them, from
their summaries, and the sidebar says so.

Completeness: every page reads :attr:`Context.completeness` (the loader's check against each
``run.json``, laid out by :func:`analysis.common.completeness.loaded_completeness`), marks an incomplete
run × task where its numbers appear (:meth:`Context.mark`, :meth:`Context.incomplete_caption`) and
leaves it out of trends and rankings unless the sidebar toggle
:data:`analysis.common.completeness.INCLUDE_LABEL` is on (:attr:`Context.include_incomplete`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import streamlit as st

from analysis.common.completeness import INCLUDE_LABEL, MARK, cell_flags, limit_summary, loaded_completeness
from analysis.runs.index import runs_signature
from analysis.runs.loader import LoadedRuns, load_runs
from analysis.runs.steps import CACHE, step_row, training_section
from dashboards.command import DEFAULT_RUNS
from dashboards.components import md_escape, widget_default
from pr1_eval.report.completeness import LIMIT_MARK

_CONTEXT_KEY = "pr1_context"
T = TypeVar("T")
#: Most samples, over all training-step runs together, that are loaded in full (see the module docstring).
TRAINING_LOAD_LIMIT = 50_000
FOLLOW_FLAG = "--follow"


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

    def drop(self, stale: Callable[[Hashable], bool]) -> None:
        """Forget every value whose key is ``stale``."""
        with self._lock:
            for key in [k for k in self._values if stale(k)]:
                del self._values[key]


MEMO = Memo()


def run_arguments(argv: Sequence[str]) -> tuple[str, ...]:
    """The runs given after ``--`` to the app (``./runs`` when none), without the follow option."""
    return app_options(argv)[0]


def app_options(argv: Sequence[str]) -> tuple[tuple[str, ...], float | None]:
    """The runs and, with ``--follow SECONDS`` (as ``pr1-eval dashboard --follow`` passes it), how
    often the run folders are scanned for new or changed runs."""
    items, follow = list(argv), None
    if FOLLOW_FLAG in items:
        at = items.index(FOLLOW_FLAG)
        follow = float(items[at + 1])
        del items[at:at + 2]
    return tuple(items) or (DEFAULT_RUNS,), follow


@dataclass
class RunSet:
    """What the runs given on the command line hold, at one signature."""

    loaded: LoadedRuns
    signature: Any
    training: dict[str, Any]  # run directory → its signature, for every training-step run
    training_left_out: int = 0  # samples of training-step runs not loaded (over TRAINING_LOAD_LIMIT)


_CURRENT: dict[tuple[str, ...], RunSet] = {}
_CURRENT_LOCK = threading.RLock()


def load(paths: tuple[str, ...]) -> RunSet:
    """The runs under ``paths`` at their current signature; a changed run is read again (with a
    progress bar), the others come from memory."""
    signature = runs_signature(paths)
    with _CURRENT_LOCK:
        held = _CURRENT.get(paths)
        if held is not None and held.signature == signature:
            return held
        found = _load(signature)
        _CURRENT[paths] = found
        if held is not None:  # everything derived from the previous state goes with it
            MEMO.drop(lambda key: isinstance(key, tuple) and len(key) > 0 and key[0] == held.signature)
        return found


def _load(signature: tuple[Any, ...]) -> RunSet:
    runs = [(Path(d), s) for d, s in signature if not isinstance(s, str)]
    failures = [(str(p), str(r)) for p, r in signature if isinstance(r, str)]
    CACHE.forget_others([d for d, _ in runs])
    training = {str(d): s for d, s in runs if training_section(d, s) is not None}
    rows = sum(int((step_row(Path(d), s) or {}).get("n_samples") or 0) for d, s in training.items())
    left_out = rows if rows > TRAINING_LOAD_LIMIT else 0
    wanted = [(d, s) for d, s in runs if not (left_out and str(d) in training)]
    bar = None
    parts = []
    for i, (run_dir, run_sig) in enumerate(wanted):
        def read(run_dir: Path = run_dir) -> LoadedRuns:
            return load_runs([run_dir], tokenizer=None)
        if bar is None:
            bar = st.progress(0.0, text="Loading runs…")
        bar.progress(i / max(len(wanted), 1), text=f"Loading runs: {run_dir.name} ({i}/{len(wanted)})")
        parts.append(CACHE.get(run_dir, run_sig, "loaded", read))
    if bar is not None:
        bar.empty()
    return RunSet(loaded=merge_loaded(parts, [d for d, _ in wanted], failures), signature=signature,
                  training=training, training_left_out=left_out)


def merge_loaded(parts: list[LoadedRuns], run_dirs: list[Path], failures: list[tuple[str, str]]) -> LoadedRuns:
    """One :class:`LoadedRuns` of runs loaded one by one (as :func:`load_runs` of all of them
    gives it); when two runs share a name, they are loaded together, which names them by path."""
    names = [name for part in parts for name in part.run_info]
    if len(names) != len(set(names)):
        merged = load_runs(run_dirs, tokenizer=None)
        merged.failures[:0] = [f for f in failures if f not in merged.failures]
        return merged
    samples = [p.samples for p in parts if not p.samples.empty]
    blocks = [p.blocks for p in parts if not p.blocks.empty]
    empty = load_runs([], tokenizer=None)  # the frames' columns, when no run gives any
    return LoadedRuns(
        samples=pd.concat(samples, ignore_index=True) if samples else empty.samples,
        blocks=pd.concat(blocks, ignore_index=True) if blocks else empty.blocks,
        failures=failures + [f for p in parts for f in p.failures],
        notes=[n for p in parts for n in p.notes],
        run_info={k: v for p in parts for k, v in p.run_info.items()},
        completeness={k: v for p in parts for k, v in p.completeness.items()})


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
    #: Every training-step run found (run directory → signature), loaded in full or not.
    training: dict[str, Any] = field(default_factory=dict)
    training_left_out: int = 0
    paths: tuple[str, ...] = ()
    follow: float | None = None

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
        """``frame`` (with run and task columns) with a ``complete`` column: 'yes' or the mark, and
        the ``--limit`` mark after it for a cell that holds only the task's first problems."""
        bad = set(zip(*(self.completeness.loc[~self.completeness["complete"], c] for c in ("run", "task")), strict=True))
        limited = self.completeness[self.completeness["limited"].astype(str) != ""]
        cut = {(str(r), str(t)): str(x) for r, t, x in zip(limited["run"], limited["task"], limited["limited"], strict=True)}
        flags = [(MARK if (str(r), str(t)) in bad else "yes")
                 + (f" {LIMIT_MARK}: {cut[(str(r), str(t))]}" if (str(r), str(t)) in cut else "")
                 for r, t in zip(frame["run"], frame["task"], strict=True)]
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


def _select_new(key: str, options: list[str]) -> None:
    """Add options that appeared since the last rerun to a remembered selection: a followed job's
    new steps are shown without a click (an option the reader removed stays removed)."""
    seen_key = f"{key}__seen"
    seen = st.session_state.get(seen_key)
    if key in st.session_state and seen is not None:
        st.session_state[key] = [*st.session_state[key], *(o for o in options if o not in seen)]
    st.session_state[seen_key] = list(options)


def build_context(argv: Sequence[str]) -> Context:
    """Load the runs and render the sidebar filters; every page reads the result via :func:`context`."""
    paths, follow = app_options(argv)
    found = load(paths)
    loaded, signature = found.loaded, found.signature
    names = run_order(loaded.samples) if not loaded.samples.empty else []
    with st.sidebar:
        _keep_valid("filter_runs", names)
        _select_new("filter_runs", names)
        runs = st.multiselect("Runs", names, default=widget_default("filter_runs", names), key="filter_runs",
                              help="runs given on the command line; every page shows only these")
        present = loaded.samples[loaded.samples["run"].isin(runs)]["task"].unique().tolist()
        tasks = sorted(str(t) for t in present)
        _keep_valid("filter_tasks", tasks)
        _select_new("filter_tasks", tasks)
        chosen_tasks = st.multiselect("Tasks", tasks, default=widget_default("filter_tasks", tasks), key="filter_tasks")
        include = st.toggle(INCLUDE_LABEL, value=False, key="include_incomplete",
                            help="runs or tasks holding fewer samples than their run.json declares (a killed run, a "
                                 "task never started) are always shown, marked; this lets them into the trend tests "
                                 "and the ranking")
        completeness = loaded_completeness(loaded)
        incomplete = completeness[~completeness["complete"] & completeness["run"].isin(runs)]
        limit_note = limit_summary(completeness[completeness["run"].isin(runs)])
        if limit_note:
            st.warning(md_escape(limit_note))  # run names are data: shown literally
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
        if found.training_left_out:
            st.caption(f"{len(found.training)} training-step run(s) hold {found.training_left_out:,} samples, more "
                       f"than the {TRAINING_LOAD_LIMIT:,} loaded in full: the Training page shows them from their "
                       "summaries; pass one step's run folder to read its rollouts on the other pages.")
    context = Context(loaded=loaded, signature=signature, runs=list(runs), tasks=list(chosen_tasks), all_runs=names,
                      completeness=completeness, include_incomplete=bool(include), training=found.training,
                      training_left_out=found.training_left_out, paths=paths, follow=follow)
    st.session_state[_CONTEXT_KEY] = context
    return context


def context() -> Context:
    """The context the app built for this rerun (see :func:`build_context`)."""
    return st.session_state[_CONTEXT_KEY]  # type: ignore[no-any-return]
