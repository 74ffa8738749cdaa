"""What goes into ``run.json`` besides the run's own settings: versions, model identity, times,
and each task's declared problem set.

Why a problem set per task: a report can only tell "30 problems, 2 done" from "2 problems, all
done" if the run says which problems it promised. :func:`task_entry` records the problem ids,
their hash and the samples per problem (k) of one task; every writer of ``run.json`` (the runner,
the JSONL and lm-eval imports) uses it, and :mod:`pr1_eval.report.completeness` reads it back.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.metadata
import json
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_STEP_RE = re.compile(r"global_step[_-]?(\d+)")


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


def checkpoint_step(model: str) -> int | None:
    """Training step parsed from a ``global_step_N`` component of the model path, if any."""
    matches = _STEP_RE.findall(model)
    return int(matches[-1]) if matches else None


def model_identity(model: str, revision: str | None = None, step: int | None = None) -> dict[str, Any]:
    """Path or hub id, revision (given, or the git commit of a local checkout), step."""
    path = Path(model).expanduser()
    info: dict[str, Any] = {"path": str(path.resolve()) if path.exists() else model, "revision": revision,
                            "step": step if step is not None else checkpoint_step(model)}
    if revision is None and path.is_dir():
        try:
            head = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                                  timeout=5, check=False)
            if head.returncode == 0 and (path / ".git").exists():
                info["revision"] = head.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return info


def problem_ids_sha256(problem_ids: Sequence[str]) -> str:
    """sha256 of the ordered problem ids (compare two runs' problem sets without listing them)."""
    return hashlib.sha256(json.dumps([str(p) for p in problem_ids], ensure_ascii=False).encode()).hexdigest()


def task_entry(problem_ids: Sequence[str], k: int, *, version: str | None, source: str | None,
               data_hash: str | None) -> dict[str, Any]:
    """``run.json``'s record of one task: where its data came from and the problems and samples
    per problem the run promises (``n_problems``, ``problem_ids``, ``problem_ids_sha256``, ``k``)."""
    ids = [str(p) for p in problem_ids]
    return {"version": version, "source": source, "data_hash": data_hash, "n_problems": len(ids),
            "problem_ids": ids, "problem_ids_sha256": problem_ids_sha256(ids), "k": int(k)}
