"""``pr1-repro merge``: VERL checkpoints → Hugging Face folders, by the checkpoint rules of
:mod:`pr1_eval.inputs.checkpoints` (the same the sweep follows, so a merged folder is where the
sweep looks for it).

Layouts handled: PPO saves ``global_step_N/actor/`` (FSDP shards, ``fsdp_config.json`` and a
``huggingface/`` folder with config and tokenizer); VERL's SFT trainer saves the same files
directly in ``global_step_N/``. Merged models go to ``global_step_N/hf`` (with the tokenizer, so
the tags survive). ``pr1-repro score`` is ``pr1-eval sweep``, which scores them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pr1_eval.inputs.checkpoints import MERGED, Checkpoint, as_checkpoint, verl_merge_command
from pr1_eval.records.steps import step_folder_step

__all__ = ["MERGED", "Checkpoint", "find_steps", "merge_command", "merge_in_process"]


def find_steps(root: Path) -> list[Checkpoint]:
    """Every ``global_step_N`` under ``root`` (or ``root`` itself), in step order."""
    root = Path(root)
    if step_folder_step(root.name) is not None:
        folders = [root]
    else:
        folders = [p for p in root.iterdir() if p.is_dir() and step_folder_step(p.name) is not None]
    found = [c for c in map(as_checkpoint, folders) if c is not None]
    return sorted(found, key=lambda c: c.step or 0)


def merge_command(step: Checkpoint) -> list[str]:
    """VERL's model merger for one step (the command ``merge`` runs)."""
    return verl_merge_command(step)


def merge_in_process(step: Checkpoint) -> None:
    """Run VERL's FSDP merger in this process (same code as the command; no second interpreter)."""
    from verl.model_merger.base_model_merger import generate_config_from_args
    from verl.model_merger.fsdp_model_merger import FSDPModelMerger

    command = verl_merge_command(step)  # raises when there are no shards
    args = argparse.Namespace(
        operation="merge",
        backend="fsdp",
        tie_word_embedding=False,
        trust_remote_code=False,
        is_value_model=False,
        local_dir=command[command.index("--local_dir") + 1],
        use_cpu_initialization=False,
        target_dir=command[command.index("--target_dir") + 1],
        hf_upload_path=None,
        private=False,
    )
    merger = FSDPModelMerger(generate_config_from_args(args))
    merger.merge_and_save()
    merger.cleanup()
