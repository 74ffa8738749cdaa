"""THE loader: every analysis, dashboard and notebook reads runs through :func:`load_runs`.

Why one loader: column names, the join of run metadata (model, step, decoding) and the way a
path's answer is extracted must be identical everywhere, or two views of one run disagree.
It returns two frames with the columns declared below (and nothing else), plus the runs that
could not be read and why, so one broken run never hides the others and never vanishes silently.

Paths are re-parsed from the stored response with :func:`pr1_eval.structure.parse_structure`
(the store keeps block positions, not path spans); each path's answer is extracted with the
grader's own :func:`pr1_eval.grading.extract_answer`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from analysis.drift import model_family, resolve_step, section
from analysis.tokens import TokenCounter, auto_token_counter
from pr1_eval.grading import extract_answer
from pr1_eval.records import COLUMN_DOCS
from pr1_eval.store import RUN_JSON, SAMPLES_DIR, RunStore
from pr1_eval.structure import Structure, parse_structure

#: Run metadata joined onto every sample and block row.
RUN_COLUMN_DOCS: dict[str, str] = {
    "run": "Run name: run.json `name`, else the directory name; the full path when two loaded runs share a name.",
    "run_path": "Absolute path of the run directory.",
    "model": "run.json model.path (local path or hub id); None when run.json has none.",
    "model_family": "Training job of the checkpoint: model.family, else the model path with global_step_N -> global_step_*.",
    "step": "Checkpoint step: run.json model.step, else global_step_N in the model path or run path; None when unknown.",
    "decoding": "run.json decoding.mode ('sequential', 'forkjoin', 'structured', 'unknown'); 'unknown' when absent.",
}
#: The samples frame: run metadata, then every stored SampleRecord field (see pr1_eval.records).
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
    "position_unit": "'token' or 'char': the unit of rel_start.",
    "path_texts": "Content of each path, surrounding whitespace stripped.",
    "path_char_lengths": "Characters of each path's stripped content.",
    "path_token_lengths": "Tokens of each path's stripped content (the run's tokenizer); None when no tokenizer.",
    "summary_char_length": "Characters of the block's <Summary> content (stripped); None when it has no summary.",
    "summary_token_length": "Tokens of the summary content; None when no summary or no tokenizer.",
    "path_answers": "Answer each path reaches, extracted by the grader's extract_answer; None where none.",
    "path_answer_sources": "Where each path answer came from: 'final_answer', 'boxed' or 'none'.",
}
BLOCK_COLUMNS: tuple[str, ...] = tuple(BLOCK_COLUMN_DOCS)

_LIST_COLUMNS = ("paths_per_block", "block_char_starts", "block_char_ends", "block_token_starts",
                 "block_token_ends", "block_rel_starts")


@dataclass
class LoadedRuns:
    """What :func:`load_runs` returns. ``failures`` lists (path, reason) for runs not loaded;
    ``notes`` lists oddities in loaded runs (e.g. stored structure disagreeing with the text)."""

    samples: pd.DataFrame
    blocks: pd.DataFrame
    failures: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def discover_runs(paths_or_roots: Iterable[str | Path] | str | Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Run directories named directly or found (recursively) under roots, in sorted order."""
    items = [paths_or_roots] if isinstance(paths_or_roots, (str, Path)) else list(paths_or_roots)
    found: list[Path] = []
    failures: list[tuple[str, str]] = []
    for item in items:
        path = Path(item).expanduser()
        if not path.exists():
            failures.append((str(item), "does not exist"))
        elif (path / RUN_JSON).is_file():
            found.append(path.resolve())
        elif path.is_dir():
            runs = sorted(p.parent.resolve() for p in path.rglob(RUN_JSON))
            orphans = sorted(p.parent for p in path.rglob(SAMPLES_DIR) if not (p.parent / RUN_JSON).is_file())
            failures.extend((str(o), f"has {SAMPLES_DIR} but no {RUN_JSON}") for o in orphans)
            if not runs and not orphans:
                failures.append((str(item), f"no run found: no {RUN_JSON} in it or below it"))
            found.extend(runs)
        else:
            failures.append((str(item), f"not a run directory (expected a folder with {RUN_JSON})"))
    unique = list(dict.fromkeys(found))
    return unique, failures


def load_runs(paths_or_roots: Iterable[str | Path] | str | Path,
              tokenizer: Literal["auto"] | TokenCounter | None = "auto") -> LoadedRuns:
    """Load every run named or found under ``paths_or_roots``.

    ``tokenizer`` gives path and summary token lengths: ``"auto"`` uses each run's own
    tokenizer when its model is a local folder; a function ``text -> n_tokens`` is used for
    every run; ``None`` leaves token lengths null (character lengths are always there).
    """
    run_dirs, failures = discover_runs(paths_or_roots)
    loaded: list[tuple[pd.DataFrame, dict[str, Any]]] = []
    for run_dir in run_dirs:
        try:
            samples, info = _read_run(run_dir)
        except Exception as exc:  # noqa: BLE001 - one unreadable run must not stop the others
            failures.append((str(run_dir), f"{type(exc).__name__}: {exc}"))
            continue
        if samples.empty:
            failures.append((str(run_dir), f"no samples stored ({SAMPLES_DIR} missing or empty)"))
            continue
        loaded.append((samples, info))
    _make_run_names_unique([samples for samples, _ in loaded])
    block_parts: list[pd.DataFrame] = []
    notes: list[str] = []
    for samples, info in loaded:
        counter = auto_token_counter(info) if isinstance(tokenizer, str) else tokenizer
        blocks, run_notes = build_blocks(samples, counter)
        if counter is None and not blocks.empty:
            run_notes.append("no tokenizer available: path and summary token lengths are null")
        block_parts.append(blocks)
        notes.extend(f"{samples['run'].iat[0]}: {note}" for note in run_notes)
    frames = [samples for samples, _ in loaded]
    return LoadedRuns(
        samples=pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(SAMPLE_COLUMNS)),
        blocks=pd.concat(block_parts, ignore_index=True) if block_parts else pd.DataFrame(columns=list(BLOCK_COLUMNS)),
        failures=failures, notes=notes)


def _read_run(run_dir: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One run's samples with run metadata joined (raises when the run cannot be read)."""
    store = RunStore(run_dir)
    info = store.read_run_json()
    if not isinstance(info, dict):
        raise ValueError(f"{RUN_JSON} is not a JSON object")
    frame = store.read_frame()
    model, decoding = section(info, "model"), section(info, "decoding")
    name = str(info.get("name") or run_dir.name)
    meta = {
        "run": name, "run_path": str(run_dir), "model": model.get("path"),
        "model_family": model_family(info, name), "step": resolve_step(info, run_dir),
        "decoding": str(decoding.get("mode") or "unknown"),
    }
    for column in _LIST_COLUMNS:
        frame[column] = pd.Series([None if v is None else list(v.tolist() if hasattr(v, "tolist") else v) for v in frame[column]],
                                  index=frame.index, dtype=object)
    for key, value in meta.items():
        frame[key] = value
    frame["step"] = frame["step"].astype("Int64")
    return frame[list(SAMPLE_COLUMNS)], info


def build_blocks(samples: pd.DataFrame, counter: TokenCounter | None) -> tuple[pd.DataFrame, list[str]]:
    """The blocks frame of one run's samples, and notes on samples whose stored structure
    disagrees with a fresh parse of their response (the parse wins; token positions dropped)."""
    rows: list[dict[str, Any]] = []
    mismatched = 0
    sample: Any
    for sample in samples.itertuples(index=False):
        response = sample.response if isinstance(sample.response, str) else ""
        structure = parse_structure(response)
        stored_ok = int(sample.n_blocks or 0) == structure.n_blocks and len(sample.block_rel_starts or []) == structure.n_blocks
        if not stored_ok:
            mismatched += 1
        rows.extend(_block_rows(sample, response, structure, stored_ok, counter))
    notes = []
    if mismatched:
        notes.append(f"{mismatched} sample(s) whose stored block fields disagree with their response; re-parsed "
                     "(character positions used)")
    return pd.DataFrame(rows, columns=list(BLOCK_COLUMNS)).astype({"step": "Int64"}), notes


def _block_rows(sample: Any, response: str, structure: Structure, stored_ok: bool,
                counter: TokenCounter | None) -> list[dict[str, Any]]:
    """Rows for one response's blocks (see :data:`BLOCK_COLUMN_DOCS`)."""
    rows = []
    token_starts = sample.block_token_starts if stored_ok else None
    token_ends = sample.block_token_ends if stored_ok else None
    for i, block in enumerate(structure.blocks):
        texts = [response[p.start:p.end].strip() for p in block.paths]
        summary = response[block.summary.start:block.summary.end].strip() if block.summary else None
        answers = [extract_answer(t) for t in texts]
        if stored_ok:
            rel, unit = float(sample.block_rel_starts[i]), str(sample.position_unit)
        else:
            rel, unit = block.start / max(len(response), 1), "char"
        rows.append({
            "run": sample.run, "task": sample.task, "problem_id": sample.problem_id, "sample_idx": int(sample.sample_idx),
            "block_idx": i, "model_family": sample.model_family, "step": sample.step, "decoding": sample.decoding,
            "n_paths": len(block.paths), "closed": block.closed, "char_start": block.start, "char_end": block.end,
            "token_start": None if token_starts is None else int(token_starts[i]),
            "token_end": None if token_ends is None else int(token_ends[i]),
            "rel_start": rel, "position_unit": unit, "path_texts": texts,
            "path_char_lengths": [len(t) for t in texts],
            "path_token_lengths": None if counter is None else [counter(t) for t in texts],
            "summary_char_length": None if summary is None else len(summary),
            "summary_token_length": None if summary is None or counter is None else counter(summary),
            "path_answers": [a.text for a in answers], "path_answer_sources": [a.source for a in answers],
        })
    return rows


def _make_run_names_unique(frames: list[pd.DataFrame]) -> None:
    """Two loaded runs with one name would merge in every group-by: such runs are named by
    their path instead (in place)."""
    paths_by_name: dict[str, set[str]] = {}
    for frame in frames:
        paths_by_name.setdefault(str(frame["run"].iat[0]), set()).add(str(frame["run_path"].iat[0]))
    for frame in frames:
        if len(paths_by_name[str(frame["run"].iat[0])]) > 1:
            frame["run"] = frame["run_path"]
