"""Which runs a notebook reads, found the same way wherever the notebook is opened from.

Why: a kernel starts in the notebook's own folder (``notebooks/``), so a bare ``runs/`` pointed at
``notebooks/runs`` and the notebooks found nothing (one raised, two printed "0 runs"). The run
root is therefore, in order: ``$PR1_RUNS`` (a run folder or a folder searched for runs); else
the nearest ``runs/`` in the current folder or one above it (the repository's ``runs/`` from
``notebooks/``); else the nearest ``pr1-demo/`` the same way (what ``pr1-eval demo`` writes).
When none exists, or nothing under it loads, the notebook stops with one sentence saying where
it looked and how to point it elsewhere, never with an empty table.

A relative ``$PR1_RUNS`` means what it means in the shell that set it: it is looked for first in
the folder the user launched from (``$PWD``, which the shell sets and ``jupyter`` passes on to
the kernel unchanged, though the kernel itself starts in the notebook's folder), then in the
kernel's folder and each folder above it, as ``runs/`` is. So ``PR1_RUNS=pr1-demo jupyter execute
notebooks/01_….ipynb`` from the repository root and ``PR1_RUNS=../pr1-demo`` from ``notebooks/``
both find the repository's ``pr1-demo/``.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from analysis.common.completeness import INCLUDE_LABEL, MARK, loaded_completeness
from analysis.runs.loader import LoadedRuns, load_runs
from pr1_eval.errors import Pr1EvalError

ENV = "PR1_RUNS"
INCLUDE_ENV = "PR1_INCLUDE_INCOMPLETE"
CANDIDATES = ("runs", "pr1-demo")


def resolve_runs_root(env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> tuple[Path, str]:
    """The run root and how it was found (see the module docstring); raises when there is none."""
    env = os.environ if env is None else env
    here = Path(cwd or Path.cwd()).resolve()
    if env.get(ENV):
        path = _given_root(env[ENV], env.get("PWD"), here)
        if path is None:
            raise Pr1EvalError(f"{ENV}={env[ENV]} does not exist (looked in {env.get('PWD') or here} and {here} "
                               f"and above); set {ENV} to a run folder or a folder holding runs (an absolute path "
                               "works from anywhere)")
        return path.resolve(), f"${ENV}"
    for folder in (here, *here.parents):
        for name in CANDIDATES:
            if (folder / name).is_dir():
                return folder / name, f"the nearest {name}/ at or above {here}"
    raise Pr1EvalError(f"no runs found: no {' or '.join(f'{c}/' for c in CANDIDATES)} in {here} or any folder above "
                       f"it, and {ENV} is not set. Set {ENV}=/path/to/runs (a run folder or a folder holding runs), "
                       "or run `pr1-eval demo` for a demo run")


def _given_root(value: str, launched_from: str | None, here: Path) -> Path | None:
    """``$PR1_RUNS`` as a path: absolute as it is; relative, the first that exists of the launch
    folder's, the kernel folder's and its parents' (see the module docstring)."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return path if path.exists() else None
    bases = [Path(launched_from)] if launched_from and Path(launched_from).is_absolute() else []
    bases += [here, *here.parents]
    return next((base / path for base in bases if (base / path).exists()), None)


def comparable_runs(loaded: LoadedRuns) -> tuple[LoadedRuns, str | None]:
    """``loaded`` cut to runs that share a task, and a sentence saying what was left out (None
    when every run shares one). A folder of runs made for different tasks has no common ground to
    rank on; the task most runs hold is kept, with the runs that hold it."""
    tasks_of = {str(run): set(map(str, tasks)) for run, tasks in loaded.samples.groupby("run", sort=False)["task"]}
    if not tasks_of or set.intersection(*tasks_of.values()):
        return loaded, None
    counts = Counter(task for tasks in tasks_of.values() for task in sorted(tasks))
    task = max(counts, key=lambda t: (counts[t], -sorted(counts).index(t)))
    keep = [run for run, tasks in tasks_of.items() if task in tasks]
    left = [run for run in tasks_of if run not in keep]
    subset = dataclasses.replace(
        loaded, samples=loaded.samples[loaded.samples["run"].isin(keep)],
        blocks=loaded.blocks[loaded.blocks["run"].isin(keep)] if "run" in loaded.blocks else loaded.blocks,
        run_info={k: v for k, v in loaded.run_info.items() if k in keep},
        completeness={k: v for k, v in loaded.completeness.items() if k in keep})
    note = (f"the runs share no task: comparing the {len(keep)} that hold {task} ({', '.join(keep)}); left out: "
            f"{', '.join(left)} (set {ENV} to a folder of runs made on the same tasks to compare them all)")
    return subset, note


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
