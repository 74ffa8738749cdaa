"""``pr1-eval``: run, report, regrade, import, demo, tiny-model, lm-eval-path (+ plugins).

Commands from packages that ``pr1_eval`` must not import (``analysis``) register themselves
through the ``pr1_eval.commands`` entry-point group: each entry is a ``register(subparsers)``
function. User errors print one clear line and exit with status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from collections.abc import Sequence
from typing import Any

from pr1_eval.errors import Pr1EvalError


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="generate, grade and store k samples per problem")
    p.add_argument("--model", required=True, help="HF model directory or hub id")
    p.add_argument("--tasks", required=True, help="comma-separated: aime24,aime25,amc23,math500,math300_pr1,gsm8k or 'all'")
    add_generation_options(p)
    p.add_argument("--out", default=None, help="run directory (default runs/<model>-<decoding>-k<k>-seed<seed>)")
    p.add_argument("--revision", default=None)
    p.add_argument("--step", type=int, default=None, help="checkpoint step (default: parsed from global_step_N)")
    p.set_defaults(func=_cmd_run)


def add_generation_options(p: argparse.ArgumentParser) -> None:
    """Options shared by every command that generates (``run``, ``sweep``): sampling, engine, decoding, data."""
    p.add_argument("-k", type=int, default=16, help="samples per problem (default 16)")
    p.add_argument("--limit", type=int, default=None, help="first N problems of each task")
    p.add_argument("--max-new-tokens", type=int, default=3000, help="response budget (paper: 3000)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--engine", default="auto", choices=["auto", "hf", "vllm"])
    p.add_argument("--decoding", default="sequential", choices=["sequential", "forkjoin", "structured"])
    p.add_argument("--paths", type=int, default=2, help="paths per block for --decoding forkjoin")
    p.add_argument("--max-blocks", type=int, default=4, help="blocks per response for forkjoin/structured")
    p.add_argument("--prompt", default="parallel_r1_v3", help="parallel_r1_v3 | sequential_baseline | boxed | FILE")
    p.add_argument("--data-dir", default=None, help="benchmark folder (default: $PR1_DATA_DIR, else the packaged copy)")
    p.add_argument("--data-source", default="auto", choices=["auto", "packaged", "hub"],
                   help="auto: --data-dir, $PR1_DATA_DIR, packaged, hub; packaged or hub: only that (default auto)")
    p.add_argument("--problems-per-chunk", type=int, default=None,
                   help="problems generated, graded and stored together (default 8 on hf, 64 on vllm; with --ray "
                        "at most that, shrinking to 1 near the end)")
    p.add_argument("--batch-size", type=int, default=64, help="HF engine: max sequences per generate call")
    p.add_argument("--tensor-parallel-size", type=int, default=1)
    p.add_argument("--data-parallel-size", type=int, default=1, help=argparse.SUPPRESS)  # replaced by --ray --replicas
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--grade-workers", type=int, default=None)
    p.add_argument("--ray", nargs="?", const="auto", default=None, metavar="auto|ADDRESS",
                   help="run replicas on a Ray cluster: auto joins the running one or starts a local one (default "
                        "without a value), or the head's ADDRESS (host:port)")
    p.add_argument("--replicas", type=_replicas, default=None, metavar="N|auto",
                   help="with --ray: engine replicas (default auto: the cluster's GPUs / --gpus-per-replica)")
    p.add_argument("--gpus-per-replica", type=int, default=None, metavar="G",
                   help="with --ray: GPUs per replica, its vLLM tensor parallelism (default 1 with GPUs, 0 without)")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="only every N-th problem from I (0-based), for job arrays; join the shards with pr1-eval merge")


def _replicas(text: str) -> int | None:
    if text == "auto":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {text!r}") from None


def scaleout_options(args: argparse.Namespace) -> dict[str, Any]:
    """``RunConfig`` fields for ``--ray``, ``--replicas``, ``--gpus-per-replica`` and ``--shard``."""
    return {"ray": args.ray, "replicas": args.replicas, "gpus_per_replica": args.gpus_per_replica, "shard": args.shard}


def _engine_options(args: argparse.Namespace) -> dict[str, object]:
    if getattr(args, "data_parallel_size", 1) != 1:
        raise Pr1EvalError("--data-parallel-size is gone: pass --ray --replicas N (one engine per Ray replica, on one "
                           "node or many; see the README's 'Many GPUs / many nodes')")
    if args.engine == "hf":
        return {"max_batch_size": args.batch_size}
    options: dict[str, object] = {"max_batch_size": args.batch_size, "tensor_parallel_size": args.tensor_parallel_size,
                                  "gpu_memory_utilization": args.gpu_memory_utilization}
    if args.max_model_len:
        options["max_model_len"] = args.max_model_len
    return options


def _cmd_run(args: argparse.Namespace) -> int:
    from pr1_eval.cli.commands import print_report
    from pr1_eval.generate.runner import RunConfig, run_eval
    from pr1_eval.inputs.tasks import parse_task_list

    config = RunConfig(
        model=args.model, tasks=parse_task_list(args.tasks), k=args.k, limit=args.limit, max_new_tokens=args.max_new_tokens,
        temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, seed=args.seed, engine=args.engine,
        decoding=args.decoding, paths=args.paths, max_blocks=args.max_blocks, prompt=args.prompt, data_dir=args.data_dir,
        data_source=args.data_source, out=args.out, problems_per_chunk=args.problems_per_chunk, grade_workers=args.grade_workers,
        revision=args.revision, step=args.step, engine_options=_engine_options(args), **scaleout_options(args),
    )
    out = run_eval(config)
    print_report(out)
    _print_scaleout_note(out)
    return 0


def _print_scaleout_note(run_dir: object) -> None:
    from pr1_eval.scaleout import summary_note

    note = summary_note(str(run_dir))
    if note:
        print(note)


def _add_merge(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("merge", help="join the --shard runs of a job array into one run")
    p.add_argument("shards", nargs="+", metavar="SHARD_RUN", help="the shard run folders (every index 0..N-1 once)")
    p.add_argument("--out", required=True, help="folder for the merged run (must not hold a run)")
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

        out = import_lm_eval(args.files[0], args.out, workers=args.grade_workers, k=k)
    else:
        out = import_jsonl(args.files[0], args.out, workers=args.grade_workers, k=k)
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


def _add_sweep(sub: argparse._SubParsersAction) -> None:
    from pr1_eval.generate.sweep import add_parser  # light at import: the sweep's heavy imports load when it runs

    add_parser(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pr1-eval", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run(sub)
    _add_sweep(sub)
    _add_merge(sub)
    p = sub.add_parser("report", help="metrics of a run")
    p.add_argument("run")
    p.add_argument("--json", action="store_true")
    p.add_argument("--strict", action="store_true", help="exit 2 when the run is incomplete (missing problems or samples)")
    p.set_defaults(func=_cmd_report)
    p = sub.add_parser("regrade", help="re-grade stored responses without generating")
    p.add_argument("run")
    p.add_argument("--grade-workers", type=int, default=None)
    p.set_defaults(func=_cmd_regrade)
    p = sub.add_parser("import", help="turn generations made elsewhere into a graded run")
    p.add_argument("files", nargs="+", metavar="FILE", help="JSON Lines file, or lm-eval's --log_samples file/folder")
    p.add_argument("--out", required=True)
    p.add_argument("--format", choices=["jsonl", "lm-eval"], default="jsonl")
    p.add_argument("--k", default=None, metavar="N|TASK=N,...",
                   help="samples per problem: every task (--k 4) or per task (--k aime24=16,math300_pr1=1); keeps the "
                        "N lowest sample_idx of each problem (default: per task, the most any problem has)")
    p.add_argument("--grade-workers", type=int, default=None)
    p.set_defaults(func=_cmd_import)
    p = sub.add_parser("tiny-model", help="build a tiny offline Qwen3 model with the six tags")
    p.add_argument("dir")
    p.add_argument("--trained", action="store_true", help="fit it to parallel-format traces (< 1 min on one core)")
    p.add_argument("--structured", action="store_true",
                   help="with --trained: train under the structured (Unseen) mask, for --decoding structured")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prompt", default=None, help="template mixed into training: parallel_r1_v3 (default) | FILE")
    p.set_defaults(func=_cmd_tiny_model)
    p = sub.add_parser("demo", help="the main job on embedded defaults: tiny model, every task, CPU")
    p.add_argument("--dir", default="pr1-demo", help="where the model and run are written (default ./pr1-demo)")
    p.add_argument("--prompt", default=None,
                   help="template to train the model on and evaluate with: parallel_r1_v3 (default) | FILE")
    p.set_defaults(func=_cmd_demo)
    p = sub.add_parser("lm-eval-path", help="print the --include_path for lm-evaluation-harness")
    p.set_defaults(func=_cmd_lm_eval_path)
    _register_plugins(sub)
    return parser


def _register_plugins(sub: argparse._SubParsersAction) -> None:
    for entry in importlib.metadata.entry_points(group="pr1_eval.commands"):
        try:
            entry.load()(sub)
        except ImportError as exc:
            print(f"warning: command {entry.name!r} unavailable ({exc})", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
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
