"""What a stage would read, checked before anything launches: the model (a local folder or a hub
id) and the train and validation files of the composed config.

Why here, apart from ``run``: ``add-tokens`` checks its base model by the same rule, and a check
that runs before a cluster launch must say in one line what is missing and how to provide it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from repro import stages

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def _as_paths(value: Any) -> list[str]:
    """A config's file entry (None, one path, or a list of paths) as a list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def model_problem(model: str) -> str | None:
    """Why ``model`` cannot be loaded, or None. A missing path shaped like ``org/name`` is a hub id
    (VERL downloads it) unless it looks local: ``./``, ``../``, ``~``, ``/``, or a first part that
    is a folder here (``models/qwen3-4b-tags`` beside a ``models/`` folder is a mistyped local
    path, and sending it to the hub would fail on the cluster). Anything else must be a local
    folder with ``config.json``."""
    path = Path(model).expanduser()
    if path.is_dir():
        return None if (path / "config.json").is_file() else f"model {path} has no config.json"
    if path.exists() or not HUB_ID.fullmatch(model) or model.startswith((".", "~", "/")):
        return f"model {path} does not exist"
    if path.parent.is_dir() and str(path.parent) != ".":
        return (f"model {path} does not exist ({path.parent}/ is a folder here, so this is a local path, not a hub "
                "id; check the name)")
    return None


def hub_note(model: str) -> str:
    """A note when ``model`` is read as a hub id (no such local folder): a mistyped local path looks the same."""
    if not Path(model).expanduser().exists() and model_problem(model) is None:
        return f"model {model} is not a local folder, so VERL will fetch it from the hub"
    return ""


def missing_inputs(stage: stages.Stage, config: Any) -> list[str]:
    """What the composed stage config reads that is not there: the model, train and validation files."""
    from omegaconf import OmegaConf

    problems = [p for p in [model_problem(str(OmegaConf.select(config, stage.model_key)))] if p]
    for key in ("data.train_files", "data.val_files"):
        for file in _as_paths(OmegaConf.select(config, key)):
            if not Path(file).expanduser().is_file():
                problems.append(f"{key} {file} does not exist")
    return problems


def missing_message(stage: str, problems: list[str], data_dir: str | None) -> str:
    """One line: what is missing, then how to provide each kind."""
    hints = []
    if any(p.startswith("model") for p in problems):
        hints.append("pass --model a local checkpoint folder or a hub id")
    if any(p.startswith("data.") for p in problems):
        folder = data_dir or os.environ.get("PR1_REPRO_DATA") or "repro_data"
        hints.append(f"build the data with `pr1-repro data --out {folder}` (or pass --data-dir)")
    hints.append("--no-path-check skips this when only the cluster sees these paths")
    return f"stage {stage}: {'; '.join(problems)}. Fix: {'; '.join(hints)}"
