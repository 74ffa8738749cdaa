"""A training job's checkpoints: where they are, which step each is, and how raw VERL shards
become a Hugging Face folder. One module for ``pr1-eval sweep`` and ``pr1-repro merge``/``score``.

Why one home: the sweep and ``pr1-repro`` both walk ``global_step_N`` folders, look for VERL's
FSDP shards and write the merged model beside them; two copies of "where the shards are" and
"where the merged folder goes" would let ``pr1-repro merge`` write a folder the sweep then does
not find.

Layouts: a ``global_step_N`` folder that is a Hugging Face folder itself, holds a merged
``global_step_N/hf``, or holds VERL's raw FSDP shards (PPO: ``global_step_N/actor``; the SFT
trainer: ``global_step_N`` itself, each with ``fsdp_config.json``); and other Hugging Face folders
(a ``config.json``; the step read from ``checkpoint-N``/``step_N`` names, else unknown). The step
and family rules are :mod:`pr1_eval.records.steps`'.

Merging runs VERL's model merger (``python -m verl.model_merger``, :func:`verl_merge_command`).
The sweep runs it through ``pr1-repro merge`` in a subprocess (:func:`merge`), because
``pr1_eval`` never imports ``repro`` (which sets up VERL's environment).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pr1_eval.errors import Pr1EvalError
from pr1_eval.records.steps import checkpoint_label, other_folder_step, run_name, step_folder_step

MERGED = "hf"
"""The folder inside ``global_step_N`` that the merge writes the Hugging Face model to."""
SHARD_MARKER = "fsdp_config.json"
"""The file VERL saves beside its FSDP shards."""


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint: where it was found, the Hugging Face folder to load, and VERL shards to merge first."""

    path: Path
    step: int | None
    model_dir: Path
    shards: Path | None = None  # VERL FSDP shards (fsdp_config.json); merged into model_dir unless it exists
    problem: str | None = None  # why it cannot be scored (reported, the sweep goes on)

    @property
    def label(self) -> str:
        return checkpoint_label(self.step, self.path)

    @property
    def is_merged(self) -> bool:
        """The Hugging Face folder to load exists (merged, or a Hugging Face folder all along)."""
        return (self.model_dir / "config.json").is_file()

    @property
    def needs_merge(self) -> bool:
        return self.shards is not None and not self.is_merged

    def run_name(self, family: str, decoding: str, k: int, seed: int) -> str:
        """This checkpoint's run folder name (:func:`pr1_eval.records.steps.run_name`)."""
        return run_name(family, self.label, decoding, k, seed)


# ----- discovery ------------------------------------------------------------------------------
def shard_dir(folder: Path) -> Path | None:
    """Where VERL saved FSDP shards: ``actor/`` (PPO) or the step folder itself (SFT)."""
    for candidate in (folder / "actor", folder):
        if (candidate / SHARD_MARKER).is_file():
            return candidate
    return None


def as_checkpoint(folder: Path) -> Checkpoint | None:
    """The checkpoint in ``folder``, or None when it is not one (an unrelated folder)."""
    step = step_folder_step(folder.name)
    if step is not None:
        shards = shard_dir(folder)
        if (folder / MERGED / "config.json").is_file():
            return Checkpoint(folder, step, folder / MERGED, shards=shards)
        if (folder / "config.json").is_file():
            return Checkpoint(folder, step, folder)
        if shards is not None:
            return Checkpoint(folder, step, folder / MERGED, shards=shards)
        return Checkpoint(folder, step, folder, problem="no config.json, no merged hf/ folder and no VERL shards "
                                                        "(fsdp_config.json) in it or in actor/")
    if (folder / "config.json").is_file():
        return Checkpoint(folder, other_folder_step(folder.name), folder)
    return None


def discover_checkpoints(root: str | Path) -> list[Checkpoint]:
    """Every checkpoint under ``root`` (or ``root`` itself), by step (unknown steps last, by name)."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise Pr1EvalError(f"checkpoint folder {root} does not exist or is not a folder; pass the folder holding "
                           "global_step_N checkpoints (or one Hugging Face model folder)")
    itself = as_checkpoint(root)
    found = [itself] if itself is not None else [c for d in sorted(root.iterdir()) if d.is_dir()
                                                 for c in [as_checkpoint(d)] if c is not None]
    if not found:
        raise Pr1EvalError(f"no checkpoints under {root}: expected global_step_N folders or Hugging Face model "
                           "folders (with config.json)")
    return sorted(found, key=lambda c: (c.step is None, c.step or 0, c.path.name))


def select_steps(checkpoints: list[Checkpoint], steps: str | None = None, every: int | None = None,
                 last: int | None = None) -> list[Checkpoint]:
    """``--steps 50,100`` (each must exist), ``--every N`` (steps divisible by N) or ``--last N``."""
    numbered = [c for c in checkpoints if c.step is not None]
    if steps:
        try:
            wanted = [int(s) for s in steps.split(",") if s.strip()]
        except ValueError:
            raise Pr1EvalError(f"--steps {steps!r}: expected comma-separated integers, e.g. --steps 50,100") from None
        have = {c.step: c for c in numbered if c.step is not None}
        missing = [s for s in wanted if s not in have]
        if missing:
            raise Pr1EvalError(f"--steps: no checkpoint for step(s) {', '.join(map(str, missing))}; found steps "
                               f"{', '.join(str(s) for s in sorted(have)) or 'none'}")
        return [have[s] for s in sorted(set(wanted))]
    if every is not None:
        if every < 1:
            raise Pr1EvalError(f"--every must be at least 1, got {every}")
        return [c for c in numbered if c.step is not None and c.step % every == 0]
    if last is not None:
        if last < 1:
            raise Pr1EvalError(f"--last must be at least 1, got {last}")
        return numbered[-last:]
    return checkpoints


# ----- merging VERL shards --------------------------------------------------------------------
def verl_available() -> bool:
    return importlib.util.find_spec("verl") is not None


def verl_merge_command(checkpoint: Checkpoint) -> list[str]:
    """VERL's model merger for one step: its shards into the step's Hugging Face folder."""
    if checkpoint.shards is None:
        raise FileNotFoundError(f"{checkpoint.path}: no FSDP checkpoint ({SHARD_MARKER}) here or in actor/")
    merger = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp"]
    return [*merger, "--local_dir", str(checkpoint.shards), "--target_dir", str(checkpoint.path / MERGED)]


def merge_hint(checkpoint: Checkpoint) -> str:
    return (f"{checkpoint.path} holds VERL FSDP shards that must be merged to a Hugging Face folder first: install "
            f"VERL (pip install -e '.[repro]') and rerun, or merge it yourself with `pr1-repro merge {checkpoint.path}` "
            f"(python -m verl.model_merger merge --backend fsdp --local_dir {checkpoint.shards} "
            f"--target_dir {checkpoint.model_dir})")


def merge_command(checkpoint: Checkpoint) -> list[str]:
    """``pr1-repro merge`` of one step (writes ``global_step_N/hf``), in its own interpreter."""
    return [sys.executable, "-m", "repro.cli", "merge", str(checkpoint.path)]


def merge(checkpoint: Checkpoint) -> None:
    """Merge a VERL step into its Hugging Face folder; raises Pr1EvalError when that fails."""
    done = subprocess.run(merge_command(checkpoint), check=False)
    if done.returncode != 0 or not checkpoint.is_merged:
        raise Pr1EvalError(f"merging {checkpoint.path} failed (exit {done.returncode}); see the merger's output above")
