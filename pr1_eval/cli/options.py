"""Command-line options every generating command shares (``run``, ``sweep``), and how they
become ``RunConfig`` fields. One definition, so a sweep scores each checkpoint exactly as
``pr1-eval run`` would."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from pr1_eval.errors import Pr1EvalError

if TYPE_CHECKING:
    from pr1_eval.generate.runner import RunConfig


def add_generation_options(p: argparse.ArgumentParser) -> None:
    """Options shared by every command that generates (``run``, ``sweep``): sampling, engine, decoding, data."""
    p.add_argument("-k", type=int, default=16, help="samples per problem")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N problems of each task")
    p.add_argument("--max-new-tokens", type=int, default=3000, metavar="N", help="response budget in tokens (the paper's)")
    p.add_argument("--temperature", type=float, default=1.0, metavar="T", help="sampling temperature; 0 is greedy (needs -k 1)")
    p.add_argument("--top-p", type=float, default=1.0, metavar="P", help="nucleus sampling; 1.0 keeps every token")
    p.add_argument("--top-k", type=int, default=0, metavar="K", help="keep the k likeliest tokens; 0 keeps every token")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="run seed; each request's seed derives from it")
    p.add_argument("--engine", default="auto", choices=["auto", "hf", "vllm"],
                   help="auto: vllm when installed with a GPU, else hf (transformers)")
    p.add_argument("--decoding", default="sequential", choices=["sequential", "forkjoin", "structured"],
                   help="sequential: one request per sample; forkjoin: the paper's rollout, each path its own "
                        "request; structured: one pass under the Unseen mask (hf only)")
    p.add_argument("--paths", type=int, default=2, metavar="N", help="paths per block for --decoding forkjoin")
    p.add_argument("--max-blocks", type=int, default=4, metavar="N", help="blocks per response for forkjoin/structured")
    p.add_argument("--after-last-block", default="end", choices=["end", "continue"],
                   help="after the last allowed block's </Summary>: end the response (the paper's rollout, "
                        "default) or continue it (fork-join writes later blocks inline, without a fork point; "
                        "structured decoding lifts the limit); recorded in run.json")
    # --- fork-join paths, as the official rollout samples them (pr1_eval.protocol.forkjoin) ---
    p.add_argument("--path-temperature", type=_path_temperature, default=1.0, metavar="T|run",
                   help="forkjoin: temperature of every path request (default 1.0, as the official rollout, "
                        "whatever --temperature is; 'run' uses --temperature); recorded in run.json")
    p.add_argument("--max-path-tokens", type=int, default=4096, metavar="N",
                   help="forkjoin: cap on each path, then </Path> (the official max_path_response_length, "
                        "default 4096; 0 = no cap)")
    p.add_argument("--secondary-eos", default="keep", choices=["keep", "replace"],
                   help="forkjoin: an EOS id of the generation config other than the tokenizer's, met inside a "
                        "path or summary: keep it and append the closing tag (the official loop, default) or "
                        "replace it by the closing tag")
    p.add_argument("--prompt", default="parallel_r1_v3", metavar="NAME|FILE",
                   help="prompt template: parallel_r1_v3, sequential_baseline, boxed, or a file with {problem}")
    p.add_argument("--data-dir", default=None, metavar="DIR",
                   help="benchmark folder (default: $PR1_DATA_DIR, else the packaged copy)")
    p.add_argument("--data-source", default="auto", choices=["auto", "packaged", "hub"],
                   help="auto: --data-dir, $PR1_DATA_DIR, packaged, hub; packaged or hub: only that (default auto)")
    p.add_argument("--problems-per-chunk", type=int, default=None, metavar="N",
                   help="problems generated, graded and stored together (default 8 on hf, 64 on vllm; with --ray "
                        "at most that, shrinking to 1 near the end)")
    p.add_argument("--batch-size", type=int, default=64, metavar="N", help="hf engine: most sequences per generate call")
    p.add_argument("--tensor-parallel-size", type=int, default=1, metavar="N", help="vllm: GPUs one model is split over")
    p.add_argument("--data-parallel-size", type=int, default=1, help=argparse.SUPPRESS)  # replaced by --ray --replicas
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9, metavar="F",
                   help="vllm: share of GPU memory it may take")
    p.add_argument("--max-model-len", type=int, default=None, metavar="N",
                   help="vllm: longest prompt + response (default: the model's)")
    p.add_argument("--grade-workers", type=int, default=None, metavar="N",
                   help="grading processes (default: $PR1_EVAL_GRADING_WORKERS, else the CPUs, at most 8)")
    p.add_argument("--ray", nargs="?", const="auto", default=None, metavar="auto|ADDRESS",
                   help="run replicas on a Ray cluster: auto joins the running one or starts a local one (default "
                        "without a value), or the head's ADDRESS (host:port)")
    p.add_argument("--replicas", type=_replicas, default=None, metavar="N|auto",
                   help="with --ray: engine replicas (default auto: the cluster's GPUs / --gpus-per-replica)")
    p.add_argument("--gpus-per-replica", type=int, default=None, metavar="G",
                   help="with --ray: GPUs per replica, its vLLM tensor parallelism (default 1 with GPUs, 0 without)")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="only every N-th problem from I (0-based), for job arrays; join the shards with pr1-eval merge")


def _path_temperature(text: str) -> float | None:
    if text == "run":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a temperature or 'run', got {text!r}") from None


def _replicas(text: str) -> int | None:
    if text == "auto":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {text!r}") from None


def run_config(args: argparse.Namespace, **overrides: Any) -> RunConfig:
    """The ``RunConfig`` these options describe: every field the parser defines under its own name
    (``-k``, ``--seed``, ``--max-blocks``, ``--ray`` …), the tasks parsed, the engine options, then
    ``overrides`` (a sweep's per-checkpoint model, out and step). ``run`` and ``sweep`` both build
    their configs here, so an option added to :func:`add_generation_options` reaches both."""
    from pr1_eval.generate.runner import RunConfig
    from pr1_eval.inputs.tasks import parse_task_list

    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(RunConfig) if hasattr(args, f.name)}
    values.update(tasks=parse_task_list(args.tasks), engine_options=engine_options(args), **overrides)
    return RunConfig(**values)


def engine_options(args: argparse.Namespace) -> dict[str, object]:
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
