"""``pr1-eval demo``: the main job end to end on embedded defaults, on CPU, in about a minute.

It builds the trained tiny model (a random-weight Qwen3 fitted to parallel-format arithmetic
traces, so it branches), runs a small slice of every task with the paper's prompt, grades it,
and prints the report. Everything lands under ``./pr1-demo`` so a newcomer can open the run
with ``pr1-eval report`` or ``pr1-eval analyze`` afterwards. Rerunning reuses the model and
resumes the run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from pr1_eval.commands import print_report
from pr1_eval.runner import RunConfig, run_eval
from pr1_eval.tasks import TASKS

DEMO_LIMIT = 2
DEMO_K = 4
DEMO_MAX_NEW_TOKENS = 160


def _demo_model(folder: Path) -> Path:
    """Reuse a finished demo model; otherwise build and train one."""
    from pr1_eval.tiny_model import build_trained_tiny_model

    manifest = folder / "tiny_model.json"
    if manifest.is_file() and json.loads(manifest.read_text()).get("kind") == "trained":
        return folder
    return Path(build_trained_tiny_model(folder, seed=0))


def run_demo(directory: str | Path = "pr1-demo") -> Path:
    """Build the model, evaluate every task on a small slice, print the report; returns the run dir."""
    root = Path(directory)
    started = time.perf_counter()
    print(f"[demo] building the trained tiny model in {root / 'tiny-model'} …")
    model = _demo_model(root / "tiny-model")
    print(f"[demo] model ready after {time.perf_counter() - started:.1f} s; evaluating {DEMO_LIMIT} problems × "
          f"k={DEMO_K} of every task: {', '.join(TASKS)}")
    config = RunConfig(model=str(model), tasks=list(TASKS), k=DEMO_K, limit=DEMO_LIMIT,
                       max_new_tokens=DEMO_MAX_NEW_TOKENS, engine="hf", out=str(root / "run"), seed=0)
    out = run_eval(config)
    print_report(out)
    print(f"\n[demo] done in {time.perf_counter() - started:.1f} s. Next: `pr1-eval report {out} --json`, "
          f"`pr1-eval analyze {out}`.")
    return out
