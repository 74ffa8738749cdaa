"""``merge`` and ``score``: VERL checkpoints → Hugging Face folders → one pr1-eval run per step.

Layouts handled: PPO saves ``global_step_N/actor/`` (FSDP shards, ``fsdp_config.json`` and a
``huggingface/`` folder with config and tokenizer); VERL's SFT trainer saves the same files
directly in ``global_step_N/``. Merged models go to ``global_step_N/hf`` (with the tokenizer, so
the tags survive), which ``score`` then evaluates, passing the step to ``pr1-eval run --step``.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

STEP_RE = re.compile(r"^global_step_(\d+)$")
MERGED = "hf"


@dataclass(frozen=True)
class StepDir:
    """One saved step: its folder, the folder with the FSDP shards, and the merged HF target."""

    step: int
    path: Path
    shards: Path | None

    @property
    def merged(self) -> Path:
        return self.path / MERGED

    @property
    def is_merged(self) -> bool:
        return (self.merged / "config.json").is_file()


def _shard_dir(step_dir: Path) -> Path | None:
    for candidate in (step_dir / "actor", step_dir):
        if (candidate / "fsdp_config.json").is_file():
            return candidate
    return None


def find_steps(root: Path) -> list[StepDir]:
    """Every ``global_step_N`` under ``root`` (or ``root`` itself), in step order."""
    root = Path(root)
    dirs = [root] if STEP_RE.match(root.name) else [p for p in root.iterdir() if p.is_dir() and STEP_RE.match(p.name)]
    steps = [StepDir(int(STEP_RE.match(d.name).group(1)), d, _shard_dir(d)) for d in dirs]  # type: ignore[union-attr]
    return sorted(steps, key=lambda s: s.step)


def merge_command(step: StepDir) -> list[str]:
    """VERL's model merger for one step (the command ``merge`` runs)."""
    if step.shards is None:
        raise FileNotFoundError(f"{step.path}: no FSDP checkpoint (fsdp_config.json) here or in actor/")
    merger = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp"]
    return [*merger, "--local_dir", str(step.shards), "--target_dir", str(step.merged)]


def merge_in_process(step: StepDir) -> None:
    """Run VERL's FSDP merger in this process (same code as the command; no second interpreter)."""
    from verl.model_merger.base_model_merger import generate_config_from_args
    from verl.model_merger.fsdp_model_merger import FSDPModelMerger

    if step.shards is None:
        raise FileNotFoundError(f"{step.path}: no FSDP checkpoint (fsdp_config.json) here or in actor/")
    args = argparse.Namespace(
        operation="merge",
        backend="fsdp",
        tie_word_embedding=False,
        trust_remote_code=False,
        is_value_model=False,
        local_dir=str(step.shards),
        use_cpu_initialization=False,
        target_dir=str(step.merged),
        hf_upload_path=None,
        private=False,
    )
    merger = FSDPModelMerger(generate_config_from_args(args))
    merger.merge_and_save()
    merger.cleanup()


@dataclass
class ScoreRequest:
    """Arguments of ``pr1-repro score`` passed on to ``pr1-eval run``."""

    tasks: str = "aime24,aime25,amc23,math500"
    k: int = 16
    decoding: str = "sequential"
    out_root: str = "runs"
    name: str | None = None
    extra: tuple[str, ...] = ()


def score_command(step: StepDir, req: ScoreRequest, run_name: str) -> list[str]:
    """``pr1-eval run`` for one merged step; the run lands in ``OUT_ROOT/NAME/step_N``."""
    out = Path(req.out_root) / run_name / f"step_{step.step}"
    cmd = ["pr1-eval", "run", "--model", str(step.merged), "--tasks", req.tasks, "-k", str(req.k)]
    return cmd + ["--decoding", req.decoding, "--step", str(step.step), "--out", str(out), *req.extra]
