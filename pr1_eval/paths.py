"""Where the benchmark data and prompt templates live.

Resolution order for the benchmark folder: an explicit ``--data-dir``; the ``PR1_DATA_DIR``
environment variable; otherwise a ``shared/data/benchmarks`` folder found beside the checkout
(walking up from the current folder and from this package), which is how the project's own
machines lay it out. When none exists, tasks load from the Hugging Face hub. The data is never
copied into this repository.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "PR1_DATA_DIR"
PROMPTS_DIR_ENV = "PR1_PROMPTS_DIR"


def _candidates() -> list[Path]:
    starts = [Path.cwd().resolve(), Path(__file__).resolve().parent]
    found: list[Path] = []
    for start in starts:
        for folder in [start, *start.parents]:
            found.append(folder / "shared" / "data")
    return found


def discover_shared_data() -> Path | None:
    """The nearest ``shared/data`` folder holding ``benchmarks/``, or None."""
    for candidate in _candidates():
        if (candidate / "benchmarks").is_dir():
            return candidate
    return None


def resolve_data_dir(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The benchmark folder to read, or None to read from the hub."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser()
    shared = discover_shared_data()
    return shared / "benchmarks" if shared else None


def resolve_prompts_dir(data_dir: Path | None = None) -> Path | None:
    """Folder with ``parallel_r1_v3.txt`` and ``sequential_baseline.txt``, or None."""
    env = os.environ.get(PROMPTS_DIR_ENV)
    if env:
        return Path(env).expanduser()
    data_dir = data_dir or resolve_data_dir()
    if data_dir is not None and (data_dir.parent / "prompts").is_dir():
        return data_dir.parent / "prompts"
    shared = discover_shared_data()
    return shared / "prompts" if shared and (shared / "prompts").is_dir() else None


def resolve_training_dir() -> Path | None:
    """Folder with the training sets (``parallel_gsm8k.jsonl`` …), or None."""
    env = os.environ.get("PR1_TRAINING_DIR")
    if env:
        return Path(env).expanduser()
    data_dir = resolve_data_dir()
    if data_dir is not None and (data_dir.parent / "training").is_dir():
        return data_dir.parent / "training"
    shared = discover_shared_data()
    return shared / "training" if shared else None
