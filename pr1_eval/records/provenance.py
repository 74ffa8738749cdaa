"""Where a run came from: package versions, the model's identity and step, times, the problem-set hash.

These are the facts a :class:`~pr1_eval.records.run.RunRecord` records about its surroundings; they
live apart from the record so that reading a record never imports ``subprocess`` or queries
installed packages.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import subprocess
from pathlib import Path

from pr1_eval.records.run import ModelInfo
from pr1_eval.records.steps import checkpoint_step

__all__ = ["checkpoint_step", "model_identity", "now_iso", "package_versions"]


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def package_versions() -> dict[str, str | None]:
    """Versions of the packages that change results (grader, generation)."""
    names = ["pr1-eval", "torch", "transformers", "math-verify", "vllm", "lm-eval", "verl", "sacrebleu",
             "sentence-transformers"]
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def model_identity(model: str, revision: str | None = None, step: int | None = None,
                   family: str | None = None) -> ModelInfo:
    """Path or hub id, revision (given, or the git commit of a local checkout), step, training family."""
    path = Path(model).expanduser()
    info = ModelInfo(path=str(path.resolve()) if path.exists() else model, revision=revision,
                     step=step if step is not None else checkpoint_step(model), family=family)
    if revision is None and path.is_dir():
        try:
            head = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                                  timeout=5, check=False)
            if head.returncode == 0 and (path / ".git").exists():
                info.revision = head.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return info
