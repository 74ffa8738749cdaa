"""``pr1-eval``: run, report, regrade, import, demo, tiny-model, lm-eval-path (+ plugins).

Commands from packages that ``pr1_eval`` must not import (``analysis``) register themselves
through the ``pr1_eval.commands`` entry-point group: each entry is a ``register(subparsers)``
function. User errors print one clear line and exit with status 2, never a traceback. Output
piped into a reader that stops early (``pr1-eval report RUN | head``) ends quietly: the closed
pipe is handled once here, for every command (plugins run through :func:`main` too), with the
exit status a command killed by SIGPIPE has (141). Help texts: :mod:`pr1_eval.cli.help`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence

from pr1_eval.cli import run as run_command
from pr1_eval.cli import sweep as sweep_command
from pr1_eval.cli.help import TOP, Parser, describe
from pr1_eval.errors import Pr1EvalError


def _add_merge(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("merge", help="join the --shard runs of a job array into one run")
    p.add_argument("shards", nargs="+", metavar="SHARD_RUN", help="the shard run folders (every index 0..N-1 once)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the merged run (must not hold a run)")
    p.set_defaults(func=_cmd_merge)


def _cmd_merge(args: argparse.Namespace) -> int:
    from pr1_eval.cli.commands import print_report
    from pr1_eval.scaleout.merge import merge_shards

    out = merge_shards(args.shards, args.out)
    print(f"merged {len(args.shards)} shards into {out}")
    print_report(out)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from pr1_eval.cli.commands import print_report

    print_report(args.run, as_json=args.json, strict=args.strict)
    return 0


def _cmd_regrade(args: argparse.Namespace) -> int:
    from pr1_eval.cli.commands import print_report, regrade

    summary = regrade(args.run, workers=args.grade_workers)
    print(f"regraded {summary['samples']} samples in {summary['seconds']} s; {summary['changed']} verdict(s) changed")
    print_report(args.run)
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from pr1_eval.cli.commands import print_report
    from pr1_eval.ingest.importer import import_jsonl, parse_k_option

    k = parse_k_option(args.k)
    if len(args.files) != 1:
        raise Pr1EvalError(f"import takes one file (or, for --format lm-eval, one output folder); got {len(args.files)}")
    if args.format == "lm-eval":
        from pr1_eval.ingest.lm_eval_import import import_lm_eval

        out = import_lm_eval(args.files[0], args.out, workers=args.grade_workers, k=k, tokenizer=args.tokenizer,
                             replace=args.replace)
    else:
        out = import_jsonl(args.files[0], args.out, workers=args.grade_workers, k=k, tokenizer=args.tokenizer,
                           replace=args.replace)
    print_report(out)
    return 0


def _cmd_tiny_model(args: argparse.Namespace) -> int:
    from pr1_eval.testing.tiny_model import cache_path, tiny_model_into

    if args.structured and not args.trained:
        raise Pr1EvalError("--structured chooses how the tiny model is trained; add --trained")
    kind = "trained-structured" if args.structured else "trained" if args.trained else "random"
    print(f"tiny model ({kind}, seed {args.seed}): shared cache {cache_path(kind, seed=args.seed, prompt=args.prompt)}")
    path, reused = tiny_model_into(args.dir, kind, seed=args.seed, prompt=args.prompt)
    print(f"{'reused the cached model' if reused else 'built it'}; written to {path}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from pr1_eval.cli.demo import run_demo

    run_demo(args.dir, prompt=args.prompt)
    return 0


def _cmd_lm_eval_path(args: argparse.Namespace) -> int:
    from pr1_eval.lm_eval_tasks import include_path

    print(include_path())
    return 0


def _add_import_verl(sub: argparse._SubParsersAction) -> None:
    from pr1_eval.ingest.verl_cli import add_parser  # light: the import's work loads when it runs

    add_parser(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="pr1-eval", description=TOP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands",
                                parser_class=Parser)
    run_command.register(sub)
    sweep_command.register(sub)
    _add_merge(sub)
    p = sub.add_parser("report", help="metrics of a run")
    p.add_argument("run", metavar="RUN", help="run folder (the one holding run.json)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--strict", action="store_true", help="exit 2 when the run is incomplete (missing problems or samples)")
    p.set_defaults(func=_cmd_report)
    p = sub.add_parser("regrade", help="re-grade stored responses without generating")
    p.add_argument("run", metavar="RUN", help="run folder (the one holding run.json)")
    p.add_argument("--grade-workers", type=int, default=None, metavar="N",
                   help="grading processes (default: $PR1_EVAL_GRADING_WORKERS, else the CPUs, at most 8)")
    p.set_defaults(func=_cmd_regrade)
    p = sub.add_parser("import", help="turn generations made elsewhere into a graded run")
    p.add_argument("files", nargs="+", metavar="FILE", help="JSON Lines file, or lm-eval's --log_samples file/folder")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the imported run (must not hold a run)")
    p.add_argument("--format", choices=["jsonl", "lm-eval"], default="jsonl",
                   help="jsonl: one sample per line; lm-eval: lm_eval's --log_samples file or folder")
    p.add_argument("--k", default=None, metavar="N|TASK=N,...",
                   help="samples per problem: every task (--k 4) or per task (--k aime24=16,math300_pr1=1); keeps the "
                        "N lowest sample_idx of each problem (default: per task, the most any problem has)")
    p.add_argument("--tokenizer", default=None, metavar="DIR",
                   help="local model folder whose tokenizer counts block positions in tokens, as a generated run "
                        "does (default: characters)")
    p.add_argument("--grade-workers", type=int, default=None, metavar="N",
                   help="grading processes (default: $PR1_EVAL_GRADING_WORKERS, else the CPUs, at most 8)")
    p.add_argument("--replace", action="store_true",
                   help="when --out already holds a run, move it aside (renamed DIR.replaced-<time>, never deleted) "
                        "instead of refusing")
    p.set_defaults(func=_cmd_import)
    p = sub.add_parser("tiny-model", help="build a tiny offline Qwen3 model with the six tags")
    p.add_argument("dir", metavar="DIR", help="folder the model is written to")
    p.add_argument("--trained", action="store_true", help="fit it to parallel-format traces (< 1 min on one core)")
    p.add_argument("--structured", action="store_true",
                   help="with --trained: train under the structured (Unseen) mask, for --decoding structured")
    p.add_argument("--seed", type=int, default=0, help="weight initialisation seed")
    p.add_argument("--prompt", default=None, metavar="NAME|FILE",
                   help="template mixed into training (default parallel_r1_v3)")
    p.set_defaults(func=_cmd_tiny_model)
    p = sub.add_parser("demo", help="the whole pipeline on a tiny model and every task, CPU, about a minute")
    p.add_argument("--dir", default="pr1-demo", metavar="DIR", help="where the model and run are written (default ./pr1-demo)")
    p.add_argument("--prompt", default=None, metavar="NAME|FILE",
                   help="template to train the model on and evaluate with (default parallel_r1_v3)")
    p.set_defaults(func=_cmd_demo)
    p = sub.add_parser("lm-eval-path", help="print the --include_path for lm-evaluation-harness")
    p.set_defaults(func=_cmd_lm_eval_path)
    for name, command in sub.choices.items():
        describe(command, name)
    _add_import_verl(sub)  # describes itself (pr1_eval.ingest.verl_cli)
    _register_plugins(sub)
    return parser


def _register_plugins(sub: argparse._SubParsersAction) -> None:
    for entry in importlib.metadata.entry_points(group="pr1_eval.commands"):
        try:
            entry.load()(sub)
        except ImportError as exc:
            print(f"warning: command {entry.name!r} unavailable ({exc})", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        status = _main(argv)
        sys.stdout.flush()  # inside the try: a reader gone before the last buffered write is the same case
        return status
    except BrokenPipeError:
        _quiet_stdout()
        return 141


def _quiet_stdout() -> None:
    """The reader of stdout is gone: point stdout at /dev/null so the interpreter's final flush
    does not raise a second BrokenPipeError on the way out."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (a test's capture): nothing to flush
        pass


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except Pr1EvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished chunks are saved — rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
