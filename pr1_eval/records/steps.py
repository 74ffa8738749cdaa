"""How a checkpoint's training step and its training job are read from names: one rule for all.

Why one home: the run record (``model.step``), the sweep's checkpoint discovery and run names,
``pr1-repro``'s merge, and analysis's grouping of runs into training jobs and their labels all
read ``global_step_N``; with one pattern they cannot disagree about which folder is step N (one
accepting ``global_step-40`` while another ignores it). Why in ``records``: the run record's
provenance needs the rule, and records sit below every stage that finds or names checkpoints
(:mod:`pr1_eval.inputs.checkpoints` builds discovery on these functions).

Pure functions of strings and paths; nothing here touches the file system.
"""

from __future__ import annotations

import re
from pathlib import Path

#: VERL's name for a step folder (``global_step_N``; ``global_step-N`` and ``global_stepN`` too).
STEP_FOLDER = r"global_step[_-]?(\d+)"
#: The same with the step starred: how a training job's family is written (``…/global_step_*/hf``).
STEP_WILDCARD = "global_step_*"
#: A step folder, numbered or starred (regex source, for patterns that match path components).
ANY_STEP_FOLDER = r"global_step[_-]?(?:\d+|\*)"
#: Other Hugging Face checkpoint folders that carry a step (``checkpoint-500``, ``step_20``).
OTHER_STEP = r"(?:checkpoint|step)[-_]?(\d+)$"

_STEP = re.compile(STEP_FOLDER)
_STEP_NAME = re.compile(rf"^{STEP_FOLDER}$")
_OTHER = re.compile(OTHER_STEP)


def step_folder_step(name: str) -> int | None:
    """The step of a folder named like a VERL step (``global_step_40`` → 40), else None."""
    match = _STEP_NAME.match(name)
    return int(match.group(1)) if match else None


def other_folder_step(name: str) -> int | None:
    """The step a Hugging Face checkpoint folder's name ends in (``checkpoint-500`` → 500), else None."""
    match = _OTHER.search(name)
    return int(match.group(1)) if match else None


def checkpoint_step(model: str) -> int | None:
    """Training step parsed from the last ``global_step_N`` component of a model path, if any."""
    matches = _STEP.findall(model)
    return int(matches[-1]) if matches else None


def starred_steps(path: str) -> str:
    """``path`` with every step folder starred: the checkpoints of one job share the result."""
    return _STEP.sub(STEP_WILDCARD, path)


def family_name(root: str | Path) -> str:
    """The training job's name: the checkpoint root's folder (its parent when it is one step)."""
    root = Path(root).expanduser().resolve()
    return root.parent.name if step_folder_step(root.name) is not None else root.name


def checkpoint_label(step: int | None, folder: Path) -> str:
    """How a checkpoint is named in run names and tables: ``step<N>``, else its folder's name."""
    return f"step{step}" if step is not None else folder.name


def run_name(family: str, label: str, decoding: str, k: int, seed: int) -> str:
    """The run folder's name of one checkpoint: ``<family>-<label>-<decoding>-k<k>-seed<seed>``."""
    return f"{family}-{label}-{decoding}-k{k}-seed{seed}"
