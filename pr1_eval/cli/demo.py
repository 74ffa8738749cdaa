"""``pr1-eval demo``: the main job end to end on embedded defaults, on CPU, in 15 s (model cached) to 2 minutes.

It takes the trained tiny model (a Qwen3 fitted to parallel-format arithmetic traces, so it
branches) from the machine's shared cache, building it there the first time (about 30 s on one
core), copies it into ``DIR/tiny-model``, runs a small slice of every packaged task (all six,
GSM8K included) with the paper's prompt, grades it and prints the report, then says under the
table that scores near zero are expected: a 96-wide model trained for a minute on arithmetic
traces writes the parallel format but cannot solve competition problems, so the demo proves the
pipeline (generation, structure parsing, grading, the report), not accuracy. Everything lands under ``./pr1-demo`` so a newcomer can
open the run with ``pr1-eval report`` or ``pr1-eval analyze`` afterwards. A rerun reuses the model
(and says so) and resumes the run.

Why one torch thread: the model is 96 wide, so a second thread buys nothing, and when another
process keeps the second core busy, OpenMP's threads wait on each other and a two-thread run takes
several times longer. Why a heartbeat: importing torch and transformers, building the model and
generating each print nothing for a while on a busy machine; a line every few seconds says what is
going on.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pr1_eval.cli import report
from pr1_eval.cli.help import add_command
from pr1_eval.errors import Pr1EvalError
from pr1_eval.inputs.prompts import DEFAULT_TEMPLATE

DEFAULT_DIR = "pr1-demo"
DEMO_LIMIT = 2
DEMO_K = 4
DEMO_MAX_NEW_TOKENS = 128
"""With six tasks instead of five (GSM8K added), 20 % more samples: the response budget is cut
from 160 to 128 tokens so the demo stays short (about 15 s with the model cached; the tiny model's responses are a
few dozen tokens; the budget caps the ones that ramble)."""
EXPECTED_SCORE = ("A tiny model is expected to score about 0 here: it is 96 wide and was trained for a minute on "
                  "arithmetic traces, so it writes the parallel format but cannot solve competition problems. "
                  "The demo proves the pipeline (generation, parsing, grading, the report), not accuracy.")
HEARTBEAT_SECONDS = 6.0
"""Longest silence while the demo works (the promise is a line at least every 10 s)."""


class Narrator:
    """``[demo]`` lines on stdout, and a heartbeat thread that repeats the current phase whenever
    nothing was said for :data:`HEARTBEAT_SECONDS`."""

    def __init__(self, every: float = HEARTBEAT_SECONDS) -> None:
        self.started = time.perf_counter()
        self.every = every
        self.phase = "starting"
        self._last = self.started
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def say(self, message: str) -> None:
        with self._lock:
            self._last = time.perf_counter()
            line = f"[demo {self._last - self.started:5.1f} s] {message}"
        try:
            from tqdm import tqdm

            tqdm.write(line, file=sys.stdout)  # keeps a progress bar on the terminal intact
        except ImportError:
            print(line)
        sys.stdout.flush()

    def enter(self, phase: str) -> None:
        """Say ``phase`` now and repeat it while it lasts."""
        self.phase = phase
        self.say(phase)

    def training_progress(self, step: int, steps: int, loss: float) -> None:
        """``tiny_training`` progress callback: a line per heartbeat interval, and the last step."""
        if time.perf_counter() - self._last >= self.every / 2 or step == steps:
            self.say(f"training the tiny model: step {step}/{steps}, loss {loss:.3f}")

    @contextmanager
    def heartbeat(self) -> Iterator[None]:
        thread = threading.Thread(target=self._beat, name="demo-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.every / 4)):
            if time.perf_counter() - self._last >= self.every:
                self.say(f"still {self.phase}")


SUMMARY = "the whole pipeline on a tiny model and every task, CPU, 15 s to 2 minutes"
DESCRIPTION = ("The whole pipeline on CPU in 15 s (tiny model cached) to 2 minutes (first run): a tiny trained model, a small slice of every packaged "
               "task, graded and reported. It proves the pipeline works, not accuracy: expect scores near zero.")
EXAMPLES = f"  pr1-eval demo\n  pr1-eval report {DEFAULT_DIR}/run"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "demo", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("--dir", default=DEFAULT_DIR, metavar="DIR",
                   help=f"where the model and run are written (default ./{DEFAULT_DIR})")
    p.add_argument("--prompt", default=None, metavar="NAME|FILE",
                   help=f"template to train the model on and evaluate with (default {DEFAULT_TEMPLATE})")
    p.set_defaults(func=_cmd_demo)


def _cmd_demo(args: argparse.Namespace) -> int:
    run_demo(args.dir, prompt=args.prompt)
    return 0


def run_demo(directory: str | Path = DEFAULT_DIR, prompt: str | None = None) -> Path:
    """Model from the cache (or built into it), every task on a small slice, the report; returns the run dir."""
    narrator = Narrator()
    narrator.say(f"pr1-eval demo into {directory}: the trained tiny model, then {DEMO_LIMIT} problems × k={DEMO_K} "
                 "of every task on CPU")
    with narrator.heartbeat():
        narrator.enter("loading torch and transformers")
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return _demo(Path(directory), prompt, narrator)
        finally:
            torch.set_num_threads(threads)


def _set_aside_another_demo(config: Any, narrator: Narrator) -> None:
    """A demo run made with other settings (an older pr1-eval's demo, another ``--prompt``) cannot
    be resumed: rather than refuse, the demo moves it aside (renamed, never deleted) and says so."""
    from pr1_eval.generate.plan import plan_inputs, planned_record
    from pr1_eval.generate.preflight import check_output
    from pr1_eval.store.out_folder import holds_run, set_aside

    out = Path(config.out)
    if not holds_run(out):
        return
    inputs = plan_inputs(config, warn=False)  # the run plans again and warns about --limit then, once
    try:
        check_output(out, planned_record(inputs, config, out.name))
    except Pr1EvalError:
        aside = set_aside(out)
        narrator.say(f"{out} holds a demo run made with other settings (an older demo, another --prompt), which "
                     f"cannot be resumed; moved it aside to {aside} (nothing deleted)")


def _demo(root: Path, prompt: str | None, narrator: Narrator) -> Path:
    from pr1_eval.generate.runner import RunConfig, run_eval
    from pr1_eval.inputs.tasks import TASKS
    from pr1_eval.testing import tiny_model

    cached = tiny_model.cache_path("trained", prompt=prompt)
    if tiny_model.is_complete(cached, "trained"):
        narrator.enter(f"reusing the trained tiny model from the shared cache ({cached})")
    else:
        narrator.enter(f"building the trained tiny model into the shared cache ({cached}); once per machine")
        tiny_model.cached_tiny_model("trained", prompt=prompt, progress=narrator.training_progress)
    model, _ = tiny_model.tiny_model_into(root / "tiny-model", "trained", prompt=prompt)
    tasks = list(TASKS)  # every packaged task, GSM8K included (``--tasks all`` leaves it out)
    narrator.enter(f"evaluating {model} on {', '.join(tasks)} ({DEMO_LIMIT} problems × k={DEMO_K} each, "
                   f"up to {DEMO_MAX_NEW_TOKENS} new tokens)")
    config = RunConfig(model=str(model), tasks=tasks, k=DEMO_K, limit=DEMO_LIMIT, max_new_tokens=DEMO_MAX_NEW_TOKENS,
                       engine="hf", out=str(root / "run"), seed=0, prompt=prompt or DEFAULT_TEMPLATE)
    _set_aside_another_demo(config, narrator)
    out = run_eval(config)
    narrator.phase = "printing the report"

    report.print_report(out)
    print("\n" + textwrap.fill(EXPECTED_SCORE, 78) + "\n")
    narrator.say(f"done. Next: `pr1-eval report {out} --json`, `pr1-eval analyze {out}`.")
    return out
