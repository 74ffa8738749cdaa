"""THE loader: every analysis, dashboard and notebook reads runs through :func:`load_runs`.

Why one loader: column names and the join of run metadata (model, step, decoding) must be
identical everywhere, or two views of one run disagree.
It returns two frames with the columns declared below (and nothing else), plus the runs that
could not be read and why, so one broken run never hides the others and never vanishes silently.

Paths are re-parsed from the stored response with :func:`pr1_eval.protocol.parse.parse_structure`
(the store keeps block positions, not path spans). What a path concludes has one rule,
:func:`analysis.structure.conclusions.path_conclusion`, read where it is needed (block roles, summary
consistency), not here: the loader gives the paths' texts.

Completeness, once: each run is checked against its ``run.json`` with the report's own
:func:`pr1_eval.report.completeness.check_completeness` on every stored sample, and the result
is kept in :attr:`LoadedRuns.completeness` (laid out per run × task by
:func:`analysis.common.completeness.completeness_frame`). Then samples of a problem the run does not
declare (not in its task's ``problem_ids``, or of a task ``run.json`` does not list) are dropped
from both frames with a note naming them: nothing counts them, and the check has already marked
the task incomplete.

Why a sidecar cache (:mod:`analysis.runs.block_cache`): that parse is most of the cost of loading a
large run (about 80 % of it for 96,000 responses), and the dashboard, the notebooks and
``analyze`` reload the same runs again and again. So each run's blocks are parsed once and
kept as parquet, keyed by the run's file signature (:func:`analysis.runs.index.run_signature`: the size,
modification time and inode of every part); a rewritten or appended part changes the key.
Responses without a ``<Parallel>`` tag skip the parser (they cannot have a block); well-formed
ones are read by :func:`pr1_eval.protocol.scan.scan_well_formed`, which gives exactly the parser's
blocks, and only the others go through the parser. Counting blocks needs no parse at all: it is
the number of ``<Parallel>`` tags (:func:`pr1_eval.protocol.scan.count_blocks`).

Text columns are Python objects (``str`` or None), not pandas' Arrow-backed strings: every
filter, group-by and sort of an Arrow string column copies its bytes (hundreds of MB of
responses each time), while object columns share their strings and copy only pointers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

import analysis.runs.block_cache as block_cache
from analysis.engine.workers import Workers
from analysis.runs.index import RunEntry, discover_runs
from analysis.runs.tokens import TokenCounter, auto_token_counter
from analysis.structure.drift import model_family, resolve_step
from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.parse import parse_structure
from pr1_eval.protocol.scan import count_blocks, scan_well_formed
from pr1_eval.records.run import RunRecord
from pr1_eval.records.sample import COLUMN_DOCS
from pr1_eval.report.completeness import RunCompleteness, check_completeness, name_ids
from pr1_eval.store.run_store import SAMPLES_DIR, RunStore, key_text

#: Run metadata joined onto every sample and block row.
RUN_COLUMN_DOCS: dict[str, str] = {
    "run": "Run name: run.json `name`, else the directory name; the full path when two loaded runs share a name.",
    "run_path": "Absolute path of the run directory.",
    "model": "run.json model.path (local path or hub id); None when run.json has none.",
    "model_family": "Training job of the checkpoint: model.family, else the model path with global_step_N -> global_step_*.",
    "step": "Checkpoint step: run.json model.step, else global_step_N in the model path or run path; None when unknown.",
    "decoding": "run.json decoding.mode ('sequential', 'forkjoin', 'structured', 'unknown'); 'unknown' when absent.",
}
#: The samples frame: run metadata, then every stored SampleRecord field (see pr1_eval.records.sample).
SAMPLE_COLUMN_DOCS: dict[str, str] = {**RUN_COLUMN_DOCS, **COLUMN_DOCS}
SAMPLE_COLUMNS: tuple[str, ...] = tuple(SAMPLE_COLUMN_DOCS)

#: The blocks frame: one row per <Parallel> block.
BLOCK_COLUMN_DOCS: dict[str, str] = {
    "run": RUN_COLUMN_DOCS["run"],
    "task": "Task name.",
    "problem_id": "Problem id within the task.",
    "sample_idx": "Sample index within the problem.",
    "block_idx": "0-based index of the block within its response.",
    "model_family": RUN_COLUMN_DOCS["model_family"],
    "step": RUN_COLUMN_DOCS["step"],
    "decoding": RUN_COLUMN_DOCS["decoding"],
    "n_paths": "Number of <Path>s in the block (closed or cut off).",
    "closed": "Whether the block's </Parallel> was written.",
    "char_start": "Character offset of <Parallel>.",
    "char_end": "Character offset just after </Parallel> (where it was cut off when unclosed).",
    "token_start": "Token index of <Parallel>; None when the run stored no token positions.",
    "token_end": "Token index just after </Parallel>; None when unknown.",
    "rel_start": "Tokens (or characters, see position_unit) before <Parallel> / response length.",
    "position_unit": "'token' or 'char': the unit of rel_start, as the sample stored it (run.json's position_unit "
                     "declares it for the run); 'char' where the stored positions disagreed with the text and were "
                     "re-parsed. Aggregates never mix the two silently: see analysis.structure.branching and analysis.structure.drift.",
    "path_texts": "Content of each path, surrounding whitespace stripped.",
    "path_char_lengths": "Characters of each path's stripped content.",
    "path_token_lengths": "Tokens of each path's stripped content (the run's tokenizer); None when no tokenizer.",
    "summary_char_length": "Characters of the block's <Summary> content (stripped); None when it has no summary.",
    "summary_token_length": "Tokens of the summary content; None when no summary or no tokenizer.",
}
BLOCK_COLUMNS: tuple[str, ...] = tuple(BLOCK_COLUMN_DOCS)
#: Block columns that come from the run's metadata, joined after the (cached) parse.
_BLOCK_META = ("run", "model_family", "step", "decoding")
#: Block columns that need a tokenizer (computed after the cache, from the texts).
_BLOCK_TOKEN = ("path_token_lengths", "summary_token_length")
#: What the parse produces and the sidecar stores: the rest, plus the summary text (for token counts).
PARSED_COLUMNS: tuple[str, ...] = tuple(c for c in BLOCK_COLUMNS if c not in _BLOCK_META + _BLOCK_TOKEN) + (
    "summary_text",)

#: The column a projected load (``load_runs(columns=...)``) gives in place of ``response``.
RESPONSE_CHARS = "response_chars"
RESPONSE_CHARS_DOC = "Characters of the response (its length: a projected load holds no response text)."
#: Sample columns every load reads (keys, and what the completeness check, the block parse's
#: agreement check and the unit notes read), whatever the projection.
_ALWAYS_READ = ("task", "problem_id", "sample_idx", "n_blocks", "block_rel_starts", "block_token_starts",
                "block_token_ends", "position_unit")

#: Of :data:`_ALWAYS_READ`, what only the block parse reads: a load without blocks does not read them
#: (unless asked for), since turning two list columns into Python lists was wasted on the leaderboard.
_PARSE_ONLY = ("block_token_starts", "block_token_ends")

_LIST_COLUMNS = ("paths_per_block", "block_char_starts", "block_char_ends", "block_token_starts",
                 "block_token_ends", "block_rel_starts")


@dataclass
class LoadedRuns:
    """What :func:`load_runs` returns. ``failures`` lists (path, reason) for runs not loaded;
    ``notes`` lists oddities in loaded runs (e.g. stored structure disagreeing with the text);
    ``run_info`` holds each loaded run's run.json by run name (k, tasks, sampling, ...);
    ``completeness`` each loaded run's check against it, made before undeclared samples were dropped
    (:func:`analysis.common.completeness.completeness_frame` lays it out per run × task)."""

    samples: pd.DataFrame
    blocks: pd.DataFrame
    failures: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    run_info: dict[str, RunRecord] = field(default_factory=dict)
    completeness: dict[str, RunCompleteness] = field(default_factory=dict)


def load_runs(paths_or_roots: Iterable[str | Path] | str | Path,
              tokenizer: Literal["auto"] | TokenCounter | None = "auto", *, cache: bool = True,
              progress: Callable[[int, int, str], None] | None = None,
              columns: Sequence[str] | None = None, blocks: bool = True,
              workers: Workers | None = None) -> LoadedRuns:
    """Load every run named or found under ``paths_or_roots``.

    ``tokenizer`` gives path and summary token lengths: ``"auto"`` uses each run's own
    tokenizer when its model is a local folder; a function ``text -> n_tokens`` is used for
    every run; ``None`` leaves token lengths null (character lengths are always there).
    ``cache``: reuse (and write) the parsed blocks in the sidecar cache (see the module docstring).
    ``progress(done, total, what)`` is called as each run is read and as its blocks are ready.
    ``columns``: keep only these sample columns (besides the run metadata and the keys), read with
    pyarrow's column projection; :data:`RESPONSE_CHARS` among them gives each response's length
    without holding its text (a sweep's responses as Python strings are most of a load's memory).
    The blocks frame is the same either way (on a cache miss each run's responses are read for
    its parse, one run at a time). ``blocks=False``: the blocks frame is left empty (the notes are
    the same: the agreement of stored and parsed structure is still checked), for callers that
    need only the samples, such as the leaderboard. ``workers`` (:mod:`analysis.engine.workers`): parse the
    runs the cache does not hold in those processes, each as soon as it is read, so they parse
    while the next runs are read here (the frames are the same).
    """
    run_dirs, failures = discover_runs(paths_or_roots)
    entries = [RunEntry(run_dir) for run_dir in run_dirs]
    counting_ahead = not blocks and columns is not None and "response" not in columns
    with _counting_ahead(entries if counting_ahead else [], cache) as ahead:
        return _load(entries, failures, tokenizer, cache, progress, columns, blocks, ahead, workers)


@contextmanager
def _counting_ahead(entries: Sequence[RunEntry], cache: bool) -> Iterator[dict[Path, Future[np.ndarray]]]:
    """Each run's ``<Parallel>`` counts (:func:`_stored_tag_counts`), computed on two threads while
    the main one reads and checks the samples, for the runs the sidecar cache cannot answer.

    Why threads: reading a sweep's responses and counting their tags is most of a load without
    blocks, and pyarrow does both without holding the GIL, so it overlaps the rest of the load and
    uses a second core. Each worker holds one run's responses at a time. These threads, and the main
    one while they run, read with pyarrow's own thread pool off (``threads=False``): three threads of
    ours plus its pool oversubscribed a small machine for the same tables."""
    if not entries:
        yield {}
        return
    with ThreadPoolExecutor(2, thread_name_prefix="pr1-block-counts") as pool:
        futures = {entry.path: pool.submit(_stored_tag_counts, entry.path, False) for entry in entries
                   if not _counts_cached(entry, cache)}
        try:
            yield futures
        finally:
            for future in futures.values():
                future.cancel()


def _counts_cached(entry: RunEntry, cache: bool) -> bool:
    try:
        return cache and block_cache.read_counts(entry.path, entry.signature) is not None
    except OSError:
        return False


def _load(entries: list[RunEntry], failures: list[tuple[str, str]], tokenizer: Literal["auto"] | TokenCounter | None,
          cache: bool, progress: Callable[[int, int, str], None] | None, columns: Sequence[str] | None, blocks: bool,
          ahead: dict[Path, Future[np.ndarray]], workers: Workers | None = None) -> LoadedRuns:
    """:func:`load_runs` on the discovered runs; ``ahead`` holds tag counts being computed for them."""
    report = progress or (lambda done, total, what: None)
    read: list[tuple[pd.DataFrame, pd.DataFrame, str | None, RunRecord, RunEntry]] = []
    parses: list[Callable[[], ParsedRun]] = []
    run_dirs = [entry.path for entry in entries]
    for i, entry in enumerate(entries):
        run_dir = entry.path
        report(i, 2 * len(run_dirs), f"reading {run_dir.name}")
        hit = _cached_parse(entry, cache) if blocks else None
        lengths_from_parse = hit is None and _lengths_from_parse(blocks, columns)
        try:
            samples, info = _read_run(entry, [c for c in columns if c != RESPONSE_CHARS]
                                      if lengths_from_parse and columns is not None else columns, threads=not ahead,
                                      parse=blocks)
        except Exception as exc:  # noqa: BLE001 - one unreadable run must not stop the others
            failures.append((str(run_dir), f"{type(exc).__name__}: {exc}"))
            continue
        if samples.empty:
            failures.append((str(run_dir), f"no samples stored ({SAMPLES_DIR} missing or empty)"))
            continue
        kept, note = drop_undeclared(samples, info)
        if blocks and not kept.empty:  # started now: the workers parse while the next runs are read
            parses.append(partial(_given, hit) if hit is not None
                          else _parse(kept, entry, cache, workers, lengths_from_parse))
        read.append((samples, kept, note, info, entry))
    _make_run_names_unique([samples for samples, _, _, _, _ in read])
    notes: list[str] = []
    checks: dict[str, RunCompleteness] = {}
    loaded: list[tuple[pd.DataFrame, RunRecord, RunEntry]] = []
    for samples, kept, note, info, entry in read:
        name = str(samples["run"].iat[0])
        checks[name] = check_completeness(info, samples)
        if note:
            notes.append(f"{name}: {note}")
        if kept is not samples and not kept.empty and str(kept["run"].iat[0]) != name:  # renamed above
            kept = kept.assign(run=name)
        loaded.append((kept, info, entry))
    failures.extend((str(entry.path), "every stored sample belongs to a problem run.json does not declare")
                    for samples, _, entry in loaded if samples.empty)
    loaded = [item for item in loaded if not item[0].empty]
    block_parts: list[pd.DataFrame] = []
    for i, (samples, info, entry) in enumerate(loaded):
        report(len(run_dirs) + i, 2 * len(run_dirs), f"finding the blocks of {entry.path.name}")
        counter = auto_token_counter(info) if isinstance(tokenizer, str) else tokenizer
        if blocks:
            parsed, n_mismatched, lengths = parses[i]()
            if lengths is not None:
                samples[RESPONSE_CHARS] = lengths
            block_parts.append(finish_blocks(parsed, samples, counter))
            n_found = len(block_parts[-1])
        else:
            n_mismatched, n_found = _block_counts(samples, entry, cache, ahead.get(entry.path))
        run_notes = [] if not n_mismatched else [_mismatch_note(n_mismatched)]
        run_notes += _unit_notes(samples, info)
        if counter is None and n_found:
            run_notes.append("no tokenizer available: path and summary token lengths are null")
        notes.extend(f"{samples['run'].iat[0]}: {note}" for note in run_notes)
    frames = [samples for samples, _, _ in loaded]
    if columns is not None:
        frames = [frame[_projected(frame, columns)] for frame in frames]
    report(2 * len(run_dirs), 2 * len(run_dirs), "done")
    empty = SAMPLE_COLUMNS if columns is None else [c for c in (*RUN_COLUMN_DOCS, *_ALWAYS_READ[:3], *columns)]
    return LoadedRuns(
        samples=pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(dict.fromkeys(empty))),
        blocks=pd.concat(block_parts, ignore_index=True) if block_parts else pd.DataFrame(columns=list(BLOCK_COLUMNS)),
        failures=failures, notes=notes,
        run_info={str(samples["run"].iat[0]): info for samples, info, _ in loaded},
        completeness={name: check for name, check in checks.items()
                      if any(str(s["run"].iat[0]) == name for s, _, _ in loaded)})


def drop_undeclared(samples: pd.DataFrame, run: RunRecord) -> tuple[pd.DataFrame, str | None]:
    """``samples`` without rows of problems ``run`` does not declare, and a note saying what went.

    A problem is undeclared when its task lists ``problem_ids`` and the id is not among them, or
    when ``run.json`` lists tasks and this task is not one of them. A task whose ``run.json``
    gives only ``n_problems`` (older runs) cannot be checked by id, so its rows stay.
    """
    if not run.tasks or samples.empty:
        return samples, None
    keep = pd.Series(True, index=samples.index)
    for task, group in samples.groupby("task", sort=False):
        entry = run.tasks.get(str(task))
        if entry is None:
            keep[group.index] = False
        elif entry.problem_ids is not None:
            keep[group.index] = group["problem_id"].astype(str).isin(set(entry.problem_ids))
    if keep.all():
        return samples, None
    dropped = samples[~keep]
    ids = [f"{t}/{p}" for t, p in dict.fromkeys(zip(dropped["task"], dropped["problem_id"], strict=True))]
    return samples[keep], (f"{len(dropped)} sample(s) of {len(ids)} problem(s) run.json does not declare left out "
                           f"of every number ({name_ids(ids, len(ids))})")


def _projected(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The columns a projected load keeps, in the loader's order: metadata, keys, then the asked ones."""
    asked = set(columns)
    return [c for c in (*SAMPLE_COLUMNS, RESPONSE_CHARS) if c in frame and (c in RUN_COLUMN_DOCS or c in asked
                                                                           or c in _ALWAYS_READ[:3])]


def _read_projection(store: RunStore, columns: Sequence[str], threads: bool = True, parse: bool = True) -> pd.DataFrame:
    """The asked stored columns (and those every load reads) of one run; ``response_chars``
    computed by pyarrow, so no response becomes a Python string; keys checked for duplicates.
    ``threads``: pyarrow's thread pool decodes (see :meth:`RunStore.read_table`); ``parse=False``:
    without the columns only the block parse reads (:data:`_PARSE_ONLY`) unless asked for."""
    import pyarrow.compute as pc

    wanted = set(columns) | {c for c in _ALWAYS_READ if parse or c not in _PARSE_ONLY}
    stored = [c for c in COLUMN_DOCS if c in wanted or (c == "response" and RESPONSE_CHARS in wanted)]
    table = store.read_table(columns=stored, threads=threads)
    if RESPONSE_CHARS in wanted:
        lengths = pc.cast(pc.fill_null(pc.utf8_length(table.column("response")), 0), "int64")  # as a parse gives
        table = table.append_column(RESPONSE_CHARS, lengths)
        if "response" not in columns:
            table = table.drop_columns(["response"])
    lists = [c for c in _LIST_COLUMNS if c in table.column_names]  # Python lists straight from Arrow
    frame = table.drop_columns(lists).to_pandas()
    for column in lists:
        frame[column] = pd.Series(table.column(column).to_pylist(), index=frame.index, dtype=object)
    duplicated = frame.duplicated(subset=["task", "problem_id", "sample_idx"], keep=False)
    if duplicated.any():
        first = frame.loc[duplicated, ["task", "problem_id", "sample_idx"]].iloc[0].tolist()
        raise Pr1EvalError(f"{store.samples_dir}: duplicated sample key {key_text(first)}; the run store is corrupt")
    return frame


def _read_run(entry: RunEntry, columns: Sequence[str] | None = None, threads: bool = True,
              parse: bool = True) -> tuple[pd.DataFrame, RunRecord]:
    """One run's samples with run metadata joined (raises when the run cannot be read); only
    the projection's columns when ``columns`` is given (see :func:`load_runs`); ``threads`` and
    ``parse``: see :func:`_read_projection`."""
    store, run_dir = entry.store, entry.path
    info = entry.record
    frame = store.read_frame() if columns is None else _read_projection(store, columns, threads, parse)
    name = run_label(info.name or run_dir.name, run_dir, info.tasks)
    meta = {
        "run": name, "run_path": str(run_dir), "model": info.model.path,
        "model_family": model_family(info, name), "step": resolve_step(info, run_dir),
        "decoding": str(info.decoding.get("mode") or "unknown"),
    }
    for column in (c for c in _LIST_COLUMNS if c in frame and columns is None):  # a projection has lists
        frame[column] = pd.Series([None if v is None else v.tolist() if hasattr(v, "tolist") else list(v)
                                   for v in frame[column]], index=frame.index, dtype=object)
    for key, value in meta.items():
        frame[key] = pd.Series([value] * len(frame), index=frame.index, dtype=object)
    for column in frame.columns:
        if pd.api.types.is_string_dtype(frame[column].dtype) and frame[column].dtype != object:
            frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    frame["step"] = frame["step"].astype("Int64")
    return frame[[c for c in (*SAMPLE_COLUMNS, RESPONSE_CHARS) if c in frame]], info


def _unit_notes(samples: pd.DataFrame, info: RunRecord) -> list[str]:
    """A note when samples with blocks store another position unit than run.json declares."""
    if not info.position_unit:
        return []
    with_blocks = samples["n_blocks"].fillna(0).astype(int) > 0
    other = int((with_blocks & (samples["position_unit"].astype(str) != info.position_unit)).sum())
    if not other:
        return []
    return [f"{other} sample(s) store block positions in another unit than run.json's position_unit "
            f"({info.position_unit!r}); each sample's own unit is used"]


def _mismatch_note(count: int) -> str:
    return (f"{count} sample(s) whose stored block fields disagree with their response; re-parsed "
            "(character positions used)")


#: One run's parse: the :data:`PARSED_COLUMNS` frame, how many samples' stored structure disagrees
#: with their text, and (when asked, see :func:`_lengths_from_parse`) each sample's response length.
ParsedRun = tuple[pd.DataFrame, int, "np.ndarray | None"]


def _cached_parse(entry: RunEntry, cache: bool) -> ParsedRun | None:
    """The sidecar cache's parse of this exact run (no response lengths: the read gives them)."""
    hit = block_cache.read(entry.path, entry.signature) if cache else None
    if hit is None or len(hit[0].columns) != len(PARSED_COLUMNS):
        return None
    return hit[0], hit[1], None


def _lengths_from_parse(blocks: bool, columns: Sequence[str] | None) -> bool:
    """Whether a run's :data:`RESPONSE_CHARS` come from its parse rather than from its read. Why:
    a projected load's parse reads every response anyway; reading them here too, only for their
    lengths, was most of the main process's read (a quarter of a second per 8,000 responses)."""
    return blocks and columns is not None and RESPONSE_CHARS in columns and "response" not in columns


def _parse(samples: pd.DataFrame, entry: RunEntry, cache: bool, workers: Workers | None,
           lengths: bool = False) -> Callable[[], ParsedRun]:
    """One run's parse (:func:`parse_run`), to be asked for when needed (the sidecar cache does
    not hold this run); with ``workers`` it is started there at once, and only the columns the
    parse reads travel. ``lengths``: the parse also gives each sample's response length."""
    signature = entry.signature if cache else None
    if workers is None:
        return partial(parse_run, samples, entry.path, signature, lengths)
    needed = samples[[c for c in _PARSE_INPUT if c in samples]]
    return workers.submit(parse_run, needed, entry.path, signature, lengths).result


def _given(value: ParsedRun) -> ParsedRun:
    return value


#: The sample columns :func:`parse_blocks` reads (``response`` is read from the store when absent).
_PARSE_INPUT = ("task", "problem_id", "sample_idx", "response", "n_blocks", "block_rel_starts", "block_token_starts",
                "block_token_ends", "position_unit")


def parse_run(samples: pd.DataFrame, run_dir: Path, signature: Any, lengths: bool = False) -> ParsedRun:
    """:func:`parse_blocks` of one run's samples (a projected load holds no response texts: this
    run's are read for it), stored in the sidecar cache under ``signature`` (None: not stored);
    ``lengths``: with each sample's :data:`RESPONSE_CHARS` (0 for a null response), in row order."""
    texts = _with_responses(samples, run_dir)
    parsed, mismatched = parse_blocks(texts)
    if signature is not None:
        block_cache.write(run_dir, signature, parsed, mismatched)
    chars = None
    if lengths:
        chars = np.fromiter((len(t) if isinstance(t, str) else 0 for t in texts["response"]), dtype=np.int64,
                            count=len(texts))
    return parsed, mismatched, chars


def _with_responses(samples: pd.DataFrame, run_dir: Path) -> pd.DataFrame:
    """``samples`` of a projected load with this run's response texts (rows by their position in the store)."""
    if "response" in samples:
        return samples
    responses = RunStore(run_dir).read_table(columns=["response"]).column("response")
    rows = samples.index.to_numpy()
    if len(rows) != len(responses) or not np.array_equal(rows, np.arange(len(rows))):  # some rows were dropped
        responses = responses.take(rows)  # (a copy of every kept text: skipped when all are kept, the usual case)
    return samples.assign(response=pd.Series(responses.to_pylist(), index=samples.index, dtype=object))


def _block_counts(samples: pd.DataFrame, entry: RunEntry, cache: bool,
                  ahead: Future[np.ndarray] | None = None) -> tuple[int, int]:
    """(samples whose stored structure disagrees with the text, blocks) without building the
    blocks frame: from the sidecar cache's footer when it holds this run, else by counting each
    response's ``<Parallel>`` tags, which is the parser's block count
    (:func:`pr1_eval.protocol.scan.count_blocks`); agreement needs only that count. ``ahead``:
    this run's counts in store order, being computed (see :func:`_counting_ahead`)."""
    if cache and (counts := block_cache.read_counts(entry.path, entry.signature)) is not None:
        return counts
    if ahead is not None and "response" not in samples:
        parsed = ahead.result()[samples.index.to_numpy()]
    else:
        parsed = _parallel_counts(samples, entry.path)
    n_stored = samples["n_blocks"].fillna(0).astype("int64").to_numpy()
    n_rel = np.fromiter((0 if v is None else len(v) for v in samples["block_rel_starts"]), dtype=np.int64,
                        count=len(samples))
    return int(((n_stored != parsed) | (n_rel != parsed)).sum()), int(parsed.sum())


def _parallel_counts(samples: pd.DataFrame, run_dir: Path) -> np.ndarray:
    """Each sample's number of ``<Parallel>`` tags (0 for a null response), in row order. A projected
    load holds no texts: pyarrow counts in the stored column (UTF-8 bytes; the tag is ASCII, so the
    count is the same), and no response becomes a Python string."""
    if "response" in samples:
        return np.fromiter((count_blocks(t) if isinstance(t, str) else 0 for t in samples["response"]),
                           dtype=np.int64, count=len(samples))
    return _stored_tag_counts(run_dir)[samples.index.to_numpy()]


def _stored_tag_counts(run_dir: Path, threads: bool = True) -> np.ndarray:
    """The ``<Parallel>`` count of every stored response of ``run_dir`` (0 for null), in store order
    (``threads``: see :meth:`RunStore.read_table`)."""
    import pyarrow.compute as pc

    responses = RunStore(run_dir).read_table(columns=["response"], threads=threads).column("response")
    # the regex kernel finds a literal many times faster than count_substring, with the same count
    counts = pc.fill_null(pc.count_substring_regex(responses, re.escape(T.PARALLEL_OPEN)), 0)
    return np.asarray(counts.to_numpy(), dtype=np.int64)


def _stored_agrees(n_blocks: Any, rel_starts: Any, n_parsed: int) -> bool:
    """Whether a sample's stored block count and positions match the ``n_parsed`` blocks of its text."""
    n_stored = 0 if n_blocks is None or pd.isna(n_blocks) else int(n_blocks)
    return n_stored == n_parsed and len(rel_starts if rel_starts is not None else []) == n_parsed


#: One block as :func:`parse_blocks` reads it, its first five fields: (start, end, closed, path
#: contents, summary content or None); a :class:`~pr1_eval.protocol.scan.ScannedBlock` is one.
_RawBlock = tuple[Any, ...]


def _raw_blocks(text: str) -> Sequence[_RawBlock]:
    """The blocks of ``text``: by the exact fast scan when it is well-formed, else by the parser."""
    scanned = scan_well_formed(text)
    if scanned is not None:
        return scanned
    return [(b.start, b.end, b.closed, [text[p.start:p.end] for p in b.paths],
             None if b.summary is None else text[b.summary.start:b.summary.end])
            for b in parse_structure(text).blocks]


def parse_blocks(samples: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The :data:`PARSED_COLUMNS` of every block of ``samples``, and how many samples' stored
    structure disagrees with a fresh parse of their response (the parse wins; token positions
    are then dropped and positions fall back to characters).

    Each block is one row tuple in :data:`PARSED_COLUMNS` order, turned into columns once at the end."""
    rows: list[tuple[Any, ...]] = []
    mismatched = 0
    keys = zip(samples["task"], samples["problem_id"], samples["sample_idx"], strict=True)
    stored = zip(samples["response"], samples["n_blocks"], samples["block_rel_starts"], samples["block_token_starts"],
                 samples["block_token_ends"], samples["position_unit"], strict=True)
    for key, (response, n_blocks, rel_starts, token_starts, token_ends, unit) in zip(keys, stored, strict=True):
        text = response if isinstance(response, str) else ""
        if T.PARALLEL_OPEN not in text:  # no block can exist: skip the parser
            mismatched += not _stored_agrees(n_blocks, rel_starts, 0)
            continue
        blocks = _raw_blocks(text)
        stored_ok = _stored_agrees(n_blocks, rel_starts, len(blocks))
        mismatched += not stored_ok
        positions = (rel_starts, token_starts, token_ends, str(unit)) if stored_ok else None
        _append_blocks(rows, (key[0], key[1], int(key[2])), blocks, len(text), positions)
    values = list(zip(*rows, strict=True)) if rows else [()] * len(PARSED_COLUMNS)
    frame = pd.DataFrame({name: list(column) if name in block_cache.DTYPES else pd.Series(column, dtype=object)
                          for name, column in zip(PARSED_COLUMNS, values, strict=True)}, columns=list(PARSED_COLUMNS))
    return frame.astype(block_cache.DTYPES), mismatched


def _append_blocks(rows: list[tuple[Any, ...]], key: tuple[Any, Any, int], blocks: Sequence[_RawBlock], length: int,
                   positions: tuple[Any, Any, Any, str] | None) -> None:
    """Append one response's blocks to ``rows`` (see :data:`BLOCK_COLUMN_DOCS`)."""
    task, problem_id, sample_idx = key
    for i, block in enumerate(blocks):
        start, end, closed, contents, summary_content = block[:5]
        texts = [t.strip() for t in contents]
        summary = None if summary_content is None else summary_content.strip()
        if positions is not None:
            rel_starts, token_starts, token_ends, unit = positions
            rel, token_start = float(rel_starts[i]), None if token_starts is None else int(token_starts[i])
            token_end = None if token_ends is None else int(token_ends[i])
        else:
            rel, unit, token_start, token_end = start / max(length, 1), "char", None, None
        rows.append((task, problem_id, sample_idx, i, len(texts), closed, start, end, token_start, token_end, rel,
                     unit, texts, [len(t) for t in texts], None if summary is None else len(summary), summary))


def finish_blocks(parsed: pd.DataFrame, samples: pd.DataFrame, counter: TokenCounter | None) -> pd.DataFrame:
    """The blocks frame of one run: parsed columns plus the run's metadata and token lengths."""
    out = parsed.copy()
    first = samples.iloc[0] if len(samples) else None
    for name in _BLOCK_META:
        out[name] = None if first is None else first[name]
    summaries = out.pop("summary_text")
    if counter is None:
        out["path_token_lengths"] = None
        out["summary_token_length"] = None
    else:
        out["path_token_lengths"] = [[counter(t) for t in texts] for texts in out["path_texts"]]
        out["summary_token_length"] = [None if s is None else counter(s) for s in summaries]
    return out[list(BLOCK_COLUMNS)].astype({"step": "Int64"})


def run_label(name: str, run_dir: Path, tasks: Iterable[str]) -> str:
    """The name a run is shown under: its own, or with its parent folder in front when it is named
    like one of its tasks (``runs/qwen3-8b/aime24``, the layout the trajectory guide uses, reads
    ``qwen3-8b/aime24``): a run called ``aime24`` beside a task column ``aime24`` reads as the task."""
    if name in set(tasks) and run_dir.parent.name:
        return f"{run_dir.parent.name}/{name}"
    return name


def distinguishing_labels(paths: Sequence[str | Path]) -> dict[str, str]:
    """For folders that share a name, the part of each path that tells them apart: the path
    components between their common start and their common end (``/x/a/runs/train/step-1`` and
    ``/x/b/runs/train/step-1`` → ``a`` and ``b``); the whole path when nothing shorter does."""
    parts = {str(p): Path(p).parts for p in paths}
    if len(parts) < 2:
        return {p: Path(p).name for p in parts}
    sequences = list(parts.values())
    head = 0
    while all(len(q) > head for q in sequences) and len({q[head] for q in sequences}) == 1:
        head += 1
    tail = 0
    while all(len(q) > head + tail for q in sequences) and len({q[-1 - tail] for q in sequences}) == 1:
        tail += 1
    labels = {p: "/".join(q[head:len(q) - tail]) or p for p, q in parts.items()}
    return labels if len(set(labels.values())) == len(labels) else {p: p for p in parts}


def _make_run_names_unique(frames: list[pd.DataFrame]) -> None:
    """Two loaded runs with one name would merge in every group-by: such runs get the part of
    their paths that differs beside the name (``job-train-step-000001 (exp1)``), never the whole
    absolute path, which made every table as wide as the file system (in place)."""
    paths_by_name: dict[str, set[str]] = {}
    for frame in frames:
        paths_by_name.setdefault(str(frame["run"].iat[0]), set()).add(str(frame["run_path"].iat[0]))
    labels = {name: distinguishing_labels(sorted(paths)) for name, paths in paths_by_name.items() if len(paths) > 1}
    for frame in frames:
        name = str(frame["run"].iat[0])
        if name in labels:
            frame["run"] = f"{name} ({labels[name][str(frame['run_path'].iat[0])]})"
