"""Where ``pr1-eval analyze`` writes, and the guard that keeps it from replacing another input's analysis.

Decision (issue 56): both a folder named by its input *and* a guard.

* Without ``--out`` an analysis goes to ``./pr1-analysis/NAME``, NAME said by its inputs
  (``runs/`` → ``pr1-analysis/runs``, ``pr1-demo/run`` → ``pr1-analysis/pr1-demo-run``), so the
  README's ``analyze runs/`` and the demo's ``analyze pr1-demo/run`` each keep their own; before,
  both wrote ``./pr1-analysis`` and the second silently replaced the first.
* Every analysis leaves :data:`MARKER` in its folder naming its inputs (resolved paths). Writing
  into a folder whose marker names other inputs, or that holds an ``analysis.json`` with no
  marker (inputs unknown), is refused in one line unless ``--force``: an explicit ``--out`` (or
  two inputs whose names collide) can no longer lose an analysis silently. Rerunning the same
  analysis into its own folder replaces it, as a rerun should.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from pr1_eval.errors import Pr1EvalError
from pr1_eval.terminal import terminal_text

ROOT = "pr1-analysis"
MARKER = ".pr1-analysis-inputs.json"
#: The longest folder name made from inputs; a longer one is cut and given a hash of the whole.
MAX_NAME = 60


def _one_name(arg: str) -> str:
    path = Path(arg).expanduser()
    if path.is_absolute() or ".." in path.parts:
        parts = path.resolve().parts[-2:]
    else:
        parts = tuple(p for p in path.parts if p not in (".", "")) or (Path.cwd().name,)
    return "-".join(parts)


def folder_name(runs: Sequence[str]) -> str:
    """A folder name for an analysis of ``runs`` (as given): each input's path, ``/`` as ``-``,
    inputs joined by ``+``; characters outside ``[A-Za-z0-9._+-]`` as ``_``; cut at
    :data:`MAX_NAME` with a hash of the full list."""
    name = re.sub(r"[^A-Za-z0-9._+-]", "_", "+".join(_one_name(r) for r in runs)).strip(".") or "input"
    if len(name) > MAX_NAME:
        digest = hashlib.sha256("\0".join(_resolved(runs)).encode()).hexdigest()[:8]
        name = f"{name[:MAX_NAME - 9].rstrip('+-_.')}-{digest}"
    return name


def default_out(runs: Sequence[str]) -> Path:
    """``./pr1-analysis/NAME`` (see :func:`folder_name`)."""
    return Path(ROOT) / folder_name(runs)


def _resolved(runs: Sequence[str]) -> list[str]:
    return sorted({str(Path(r).expanduser().resolve()) for r in runs})


def check_replace(out: Path, runs: Sequence[str], force: bool) -> None:
    """Refuse (one line: what, where, how to go on) to write over the analysis of other inputs."""
    if force or not out.is_dir():
        return
    marker = out / MARKER
    try:
        previous = json.loads(marker.read_text(encoding="utf-8"))["inputs"]
    except FileNotFoundError:
        if not (out / "analysis.json").exists():
            return
        previous = None
    except (OSError, ValueError, KeyError, TypeError):
        previous = None
    if previous == _resolved(runs):
        return
    what = "an analysis of unknown inputs" if previous is None else "the analysis of " + ", ".join(previous)
    raise Pr1EvalError(terminal_text(f"{out} holds {what}; pass --out DIR to write this one elsewhere, or --force to "
                                     "replace it"))


def write_marker(out: Path, runs: Sequence[str]) -> None:
    """Name this analysis's inputs in its folder (written aside, then renamed into place)."""
    temporary = out / f"{MARKER}.{os.getpid()}.tmp"
    temporary.write_text(json.dumps({"inputs": _resolved(runs)}, indent=1) + "\n", encoding="utf-8")
    os.replace(temporary, out / MARKER)
