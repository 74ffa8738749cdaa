"""Which runs a notebook reads, found the same way wherever the notebook is opened from.

Why: a kernel starts in the notebook's own folder (``notebooks/``), so a bare ``runs/`` pointed at
``notebooks/runs`` and the notebooks found nothing (one raised, two printed "0 runs"). The run
root is therefore, in order: ``$PR1_RUNS`` (a run folder or a folder searched for runs); else
the nearest ``runs/`` in the current folder or one above it (the repository's ``runs/`` from
``notebooks/``); else the nearest ``pr1-demo/`` the same way (what ``pr1-eval demo`` writes).
When none exists, or nothing under it loads, the notebook stops with one sentence saying where
it looked and how to point it elsewhere, never with an empty table.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from analysis.completeness import INCLUDE_LABEL, MARK, loaded_completeness
from analysis.loader import LoadedRuns, load_runs
from pr1_eval.errors import Pr1EvalError

ENV = "PR1_RUNS"
INCLUDE_ENV = "PR1_INCLUDE_INCOMPLETE"
CANDIDATES = ("runs", "pr1-demo")


def resolve_runs_root(env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> tuple[Path, str]:
    """The run root and how it was found (see the module docstring); raises when there is none."""
    env = os.environ if env is None else env
    if env.get(ENV):
        path = Path(env[ENV]).expanduser()
        if not path.exists():
            raise Pr1EvalError(f"{ENV}={env[ENV]} does not exist; set {ENV} to a run folder or a folder holding runs")
        return path.resolve(), f"${ENV}"
    here = Path(cwd or Path.cwd()).resolve()
    for name in CANDIDATES:
        for folder in (here, *here.parents):
            if (folder / name).is_dir():
                return folder / name, f"the nearest {name}/ at or above {here}"
    raise Pr1EvalError(f"no runs found: no {' or '.join(f'{c}/' for c in CANDIDATES)} in {here} or any folder above "
                       f"it, and {ENV} is not set. Set {ENV}=/path/to/runs (a run folder or a folder holding runs), "
                       "or run `pr1-eval demo` for a demo run")


def include_incomplete(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``$PR1_INCLUDE_INCOMPLETE=1`` asks to let incomplete runs into trends and rankings."""
    return (os.environ if env is None else env).get(INCLUDE_ENV, "") == "1"


def load_notebook_runs(root: str | Path | None = None, where: str = "given", **load_options: Any) -> LoadedRuns:
    """Load the runs under ``root`` (default :func:`resolve_runs_root`; ``where`` says how it was
    found), printing where they came from, each run not loaded and each incomplete run × task;
    raises when none loads."""
    if root is None:
        root, where = resolve_runs_root()
    loaded = load_runs(root, **load_options)
    for path, reason in loaded.failures:
        print(f"not loaded: {path} - {reason}", file=sys.stderr)
    if loaded.samples.empty:
        raise Pr1EvalError(f"no run could be loaded from {root} ({where}); set {ENV} to a run folder or a folder "
                           "holding runs")
    print(f"{loaded.samples['run'].nunique()} run(s) from {root} ({where})")
    cells = loaded_completeness(loaded)
    incomplete = cells[~cells["complete"]]
    for record in incomplete.to_dict("records"):
        print(f"{MARK}: {record['run']} / {record['task']}: {record['missing']}")
    if len(incomplete):
        print(f"{MARK} runs × tasks are shown, marked, and left out of trends and rankings; set {INCLUDE_ENV}=1 to "
              f"include them (the dashboard's sidebar toggle '{INCLUDE_LABEL}', analyze --include-incomplete)")
    return loaded
