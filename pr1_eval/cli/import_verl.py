"""``pr1-eval import-verl``: a VERL job's rollout and validation dumps as one run per step.

The work is :mod:`pr1_eval.ingest.verl_import`'s, loaded when the command runs (it brings the
grader and the store); ``--kind``'s choices are the training section's ``KIND_DIRS``.

``--follow [SECONDS]`` imports again every SECONDS until Ctrl-C, for a job that is still running:
each round imports only steps that are new or changed and never a file still being written (the
import's own rules), so a round with nothing new costs a scan and a stat per step, and prints
nothing. A dump folder that has no step file yet is waited for, not refused.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pr1_eval.ingest.verl_import import ImportOptions

from pr1_eval.cli.help import add_command
from pr1_eval.cli.numbers import float_in, positive_int
from pr1_eval.cli.options import add_grade_workers_option
from pr1_eval.errors import Pr1EvalError
from pr1_eval.ingest.verl_formats import Lengths
from pr1_eval.records.training import KIND_DIRS

SUMMARY = "turn a VERL job's rollout/validation dumps into runs"
DESCRIPTION = (
    "Turn a VERL training job's rollout and validation dumps (the {step}.jsonl files of "
    "trainer.rollout_data_dir and validation_data_dir) into one run per step: RUNS_ROOT/train/step-N and "
    "RUNS_ROOT/val/step-N. Reads the official Parallel-R1 fork's dumps (tags kept, pads stripped, token counts "
    "from the padding) and VERL 0.9.1's (tags lost: structure cannot be measured there). Problems are matched "
    "by prompt text to --data and the packaged benchmarks. Rerun it at any time: only new or changed steps "
    "are imported, and the newest step waits until a later one exists (or --final)."
)
EXAMPLES = (
    "  pr1-eval import-verl ckpt/Parallel-R1-S1 --out runs/s1 --data val.parquet\n"
    "  pr1-eval import-verl ckpt/job/rollout-log --out runs/job --final\n"
    "  pr1-eval import-verl ckpt/job --out runs/job --follow 60   # Ctrl-C stops"
)
#: Seconds between rounds of ``--follow`` given without a number.
FOLLOW_DEFAULT_S = 60.0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "import-verl", summary=SUMMARY, description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("dump_dir", metavar="DUMP_DIR",
                   help="a folder of {step}.jsonl dumps, or the folder holding the job's dump folders")
    p.add_argument("--out", required=True, metavar="RUNS_ROOT", help="folder for the per-step runs")
    p.add_argument("--data", action="append", default=[], metavar="FILE",
                   help="the job's training or validation data (parquet or jsonl) to match problems and golds "
                        "against; repeat for several (default: the packaged benchmarks only)")
    p.add_argument("--no-benchmarks", action="store_true",
                   help="do not match prompts against the packaged benchmarks")
    p.add_argument("--job", default=None, metavar="NAME",
                   help="the job's name in the runs (default: the folder holding the dump folders)")
    p.add_argument("--kind", choices=list(KIND_DIRS), default=None,
                   help="what a DUMP_DIR of step files holds (default: from its name; 'val' means validation)")
    p.add_argument("--final", action="store_true",
                   help="the job has ended: import the newest step too (otherwise it waits for a later one)")
    p.add_argument("--max-prompt-length", type=positive_int, default=Lengths().prompt, metavar="N",
                   help="the job's data.max_prompt_length, to count prompt tokens from the fork's padding")
    p.add_argument("--max-response-length", type=positive_int, default=Lengths().response, metavar="N",
                   help="the job's data.max_response_length, to count response tokens from the padding")
    p.add_argument("--tokenizer", default=None, metavar="DIR",
                   help="local model folder whose tokenizer counts block positions in tokens, and response "
                        "tokens where the dump has no padding to count them from (default: characters)")
    p.add_argument("--no-grade", action="store_true",
                   help="keep only the job's own reward and accuracy; do not grade with pr1-eval's grader")
    add_grade_workers_option(p)
    p.add_argument("--follow", type=float_in(0.0, low_open=True), nargs="?", const=FOLLOW_DEFAULT_S, default=None, metavar="SECONDS",
                   help=f"keep importing new steps every SECONDS (default {FOLLOW_DEFAULT_S:g}) until Ctrl-C, for a "
                        "running job; pair it with `pr1-eval dashboard --follow RUNS_ROOT`")
    p.set_defaults(func=_cmd_import_verl)


def _cmd_import_verl(args: argparse.Namespace) -> int:
    from pr1_eval.ingest.verl_import import ImportOptions, run_command

    opts = ImportOptions(job=args.job, kind=args.kind, final=args.final, data=list(args.data),
                         benchmarks=not args.no_benchmarks,
                         lengths=Lengths(args.max_prompt_length, args.max_response_length),
                         grade=not args.no_grade, workers=args.grade_workers, tokenizer=args.tokenizer)
    if args.follow is not None:
        return follow(args.dump_dir, args.out, opts, args.follow)
    run_command(args.dump_dir, args.out, opts)
    return 0


def has_step_files(dump_dir: str) -> bool:
    """Whether the dump folder (or a folder in it) holds a ``{step}.jsonl`` yet."""
    root = Path(dump_dir).expanduser()
    return root.is_dir() and (any(root.glob("*.jsonl")) or any(root.glob("*/*.jsonl")))


def follow(dump_dir: str, runs_root: str, opts: ImportOptions, every: float, rounds: int | None = None,
           sleep: Callable[[float], None] | None = None) -> int:
    """Import, then again every ``every`` seconds, until Ctrl-C (or ``rounds`` rounds, for tests):
    the summary of each round that imported something; one line whenever the waiting step changes."""
    from pr1_eval.ingest.verl_import import import_verl, summary_lines

    if every <= 0:
        raise Pr1EvalError(f"--follow {every:g}: give the seconds between rounds, a positive number")
    print(f"following {dump_dir} into {runs_root} every {every:g} s; Ctrl-C stops", file=sys.stderr, flush=True)
    waiting: list[int] | None = None
    pause = sleep or time.sleep
    done = 0
    try:
        while rounds is None or done < rounds:
            if has_step_files(dump_dir):
                results = import_verl(dump_dir, runs_root, opts)
                new = [r for r in results if r.status not in ("unchanged", "waiting")]
                if new:
                    print(time.strftime("%H:%M:%S ") + "\n".join(summary_lines(new)), flush=True)
                now_waiting = [r.file.step for r in results if r.status == "waiting"]
                if now_waiting and now_waiting != waiting:
                    print(f"step {now_waiting[0]} waits until a later step exists (it may still be written)",
                          file=sys.stderr, flush=True)
                waiting = now_waiting
            elif waiting is None:
                print(f"{dump_dir}: no step file yet; waiting", file=sys.stderr, flush=True)
                waiting = []
            done += 1
            if rounds is None or done < rounds:
                pause(every)
    except KeyboardInterrupt:
        print("stopped following (Ctrl-C); rerun with --final once the job has ended to import its last step",
              file=sys.stderr)
    return 0
