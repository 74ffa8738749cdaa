"""Command-line options every generating command shares (``run``, ``sweep``), and how they
become ``RunConfig`` fields. One definition, so a sweep scores each checkpoint exactly as
``pr1-eval run`` would."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from pr1_eval.cli.numbers import float_in, int_in, positive_int, seed_int
from pr1_eval.decoding.factory import DECODING_MODES
from pr1_eval.engines.factory import ENGINES
from pr1_eval.errors import Pr1EvalError
from pr1_eval.generate.config import RunConfig
from pr1_eval.inputs.prompts import DEFAULT_TEMPLATE, SHARED_TEMPLATES
from pr1_eval.inputs.tasks import DATA_SOURCES, TASKS, parse_task_list
from pr1_eval.processes import check_worker_count
from pr1_eval.protocol.forkjoin import AFTER_LAST_BLOCK, SECONDARY_EOS
from pr1_eval.protocol.paper_settings import (
    PAPER_K,
    PAPER_MAX_BLOCKS,
    PAPER_MAX_NEW_TOKENS,
    PAPER_MAX_PATH_TOKENS,
    PAPER_PATH_TEMPERATURE,
    PAPER_PATHS,
    PAPER_TEMPERATURE,
    PAPER_TOP_P,
)
from pr1_eval.records.answer_policy import ANSWER_POLICIES, POLICY_SUMMARIES

_DEFAULTS = RunConfig(model="", tasks=[])
"""The run's defaults, where the options read theirs (so ``--help`` shows what a run uses)."""


def add_tasks_option(p: argparse.ArgumentParser) -> None:
    """``--tasks``: the registered tasks (:data:`pr1_eval.inputs.tasks.TASKS`) by name, or ``all``."""
    p.add_argument("--tasks", required=True, metavar="TASKS",
                   help=f"comma-separated: {', '.join(TASKS)}; 'all' is {', '.join(parse_task_list('all'))}")


def add_answer_policy_option(p: argparse.ArgumentParser, default_help: str) -> None:
    """``--answer-policy``: which text of a response is its answer (:mod:`pr1_eval.grading.policy`);
    ``run``, ``sweep``, ``import`` and ``regrade`` share this one definition. Default ``None``: the
    command's own default, which ``default_help`` states."""
    summaries = "; ".join(f"{name}: {POLICY_SUMMARIES[name]}" for name in ANSWER_POLICIES)
    p.add_argument("--answer-policy", choices=ANSWER_POLICIES, default=None, metavar="|".join(ANSWER_POLICIES),
                   help=f"which text is the answer ({summaries}); recorded in run.json; default: {default_help}")


def add_grade_workers_option(p: argparse.ArgumentParser) -> None:
    """``--grade-workers``, one option for every command that grades: 0 grades in the command's own
    process; past :func:`pr1_eval.processes.worker_limit` (or below 0) it is refused, as
    ``$PR1_EVAL_GRADING_WORKERS`` is."""
    p.add_argument("--grade-workers", type=_grade_workers, default=None, metavar="N",
                   help="grading processes, 0 to grade in this process (default: $PR1_EVAL_GRADING_WORKERS, "
                        "else the CPUs, at most 8)")


def _grade_workers(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of processes, got {text!r}") from None
    try:
        return check_worker_count(count, "", "grading", zero="grades in this process")
    except Pr1EvalError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_generation_options(p: argparse.ArgumentParser) -> None:
    """Options shared by every command that generates (``run``, ``sweep``): sampling, engine, decoding, data."""
    p.add_argument("-k", type=int, default=PAPER_K, help="samples per problem")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N problems of each task")
    p.add_argument("--max-new-tokens", type=int, default=PAPER_MAX_NEW_TOKENS, metavar="N",
                   help="response budget in tokens (the paper's)")
    p.add_argument("--temperature", type=float, default=PAPER_TEMPERATURE, metavar="T",
                   help="sampling temperature; 0 is greedy (needs -k 1)")
    p.add_argument("--top-p", type=float, default=PAPER_TOP_P, metavar="P", help="nucleus sampling; 1.0 keeps every token")
    p.add_argument("--top-k", type=int, default=_DEFAULTS.top_k, metavar="K",
                   help="keep the k likeliest tokens; 0 keeps every token")
    p.add_argument("--seed", type=seed_int, default=_DEFAULTS.seed, metavar="N",
                   help="run seed; each request's seed derives from it")
    p.add_argument("--engine", default=_DEFAULTS.engine, choices=ENGINES,
                   help="auto: vllm when installed with a GPU, else hf (transformers); openai: a running server's "
                        "OpenAI-compatible API (--base-url)")
    p.add_argument("--decoding", default=_DEFAULTS.decoding, choices=DECODING_MODES,
                   help="sequential: one request per sample; forkjoin: the paper's rollout, each path its own "
                        "request; structured: one pass under the Unseen mask (hf only)")
    p.add_argument("--paths", type=int, default=PAPER_PATHS, metavar="N", help="paths per block for --decoding forkjoin")
    p.add_argument("--max-blocks", type=int, default=PAPER_MAX_BLOCKS, metavar="N",
                   help="blocks per response for forkjoin/structured")
    p.add_argument("--after-last-block", default=AFTER_LAST_BLOCK[0], choices=AFTER_LAST_BLOCK,
                   help=f"after the last allowed block's </Summary>: {AFTER_LAST_BLOCK[0]} the response (the paper's "
                        f"rollout, default) or {AFTER_LAST_BLOCK[1]} it (fork-join writes later blocks inline, without "
                        "a fork point; structured decoding lifts the limit); recorded in run.json")
    # --- fork-join paths, as the official rollout samples them (pr1_eval.protocol.forkjoin) ---
    p.add_argument("--path-temperature", type=_path_temperature, default=PAPER_PATH_TEMPERATURE, metavar="T|run",
                   help=f"forkjoin: temperature of every path request (default {PAPER_PATH_TEMPERATURE}, as the "
                        "official rollout, whatever --temperature is; 'run' uses --temperature); recorded in run.json")
    p.add_argument("--max-path-tokens", type=int, default=PAPER_MAX_PATH_TOKENS, metavar="N",
                   help="forkjoin: cap on each path, then </Path> (the official max_path_response_length, "
                        f"default {PAPER_MAX_PATH_TOKENS}; 0 = no cap)")
    p.add_argument("--secondary-eos", default=SECONDARY_EOS[0], choices=SECONDARY_EOS,
                   help="forkjoin: an EOS id of the generation config other than the tokenizer's, met inside a "
                        f"path or summary: {SECONDARY_EOS[0]} it and append the closing tag (the official loop, "
                        f"default) or {SECONDARY_EOS[1]} it by the closing tag")
    p.add_argument("--prompt", default=DEFAULT_TEMPLATE, metavar="NAME|FILE",
                   help=f"prompt template: {', '.join(SHARED_TEMPLATES)}, boxed, or a file with {{problem}}")
    add_answer_policy_option(p, "paper for the paper's prompt (parallel_r1_v3), lenient for every other")
    p.add_argument("--data-dir", default=None, metavar="DIR",
                   help="benchmark folder (default: $PR1_DATA_DIR, else the packaged copy)")
    p.add_argument("--data-source", default=DATA_SOURCES[0], choices=DATA_SOURCES,
                   help="auto: --data-dir, $PR1_DATA_DIR, packaged, hub; packaged or hub: only that (default auto)")
    p.add_argument("--problems-per-chunk", type=positive_int, default=None, metavar="N",
                   help="problems generated, graded and stored together (default 8 on hf, 64 on vllm and openai; with --ray "
                        "at most that, shrinking to 1 near the end)")
    _add_engine_options(p)
    add_grade_workers_option(p)
    p.add_argument("--ray", nargs="?", const="auto", default=None, metavar="auto|ADDRESS",
                   help="run replicas on a Ray cluster: auto joins the running one or starts a local one (default "
                        "without a value), or the head's ADDRESS (host:port)")
    p.add_argument("--replicas", type=_replicas, default=None, metavar="N|auto",
                   help="with --ray: engine replicas (default auto: the cluster's GPUs / --gpus-per-replica)")
    p.add_argument("--gpus-per-replica", type=int_in(0), default=None, metavar="G",
                   help="with --ray: GPUs per replica, its vLLM tensor parallelism (default 1 with GPUs, 0 without)")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="only every N-th problem from I (0-based), for job arrays; join the shards with pr1-eval merge")
    _add_adaptive_options(p)


def _add_adaptive_options(p: argparse.ArgumentParser) -> None:
    """``--adaptive`` and its rule's parameters (:mod:`pr1_eval.stats.sequential`)."""
    p.add_argument("--adaptive", action="store_true",
                   help="draw samples in rounds and stop a problem once an anytime-valid confidence sequence settles "
                        "its p below --adaptive-margin or above 1 - margin; -k is the most samples a problem gets; "
                        "recorded in run.json")
    p.add_argument("--round-size", type=int, default=_DEFAULTS.round_size, metavar="N",
                   help="with --adaptive: samples per problem per round")
    p.add_argument("--adaptive-alpha", type=float, default=_DEFAULTS.adaptive_alpha, metavar="A",
                   help="with --adaptive: chance that a problem is ever settled on the wrong side")
    p.add_argument("--adaptive-margin", type=float, default=_DEFAULTS.adaptive_margin, metavar="M",
                   help="with --adaptive: settled when p is surely below M or above 1 - M (0.5: which side of 1/2; "
                        "smaller keeps more samples of nearly always solved problems)")


#: Engine options and the ``--`` option that sets each; ``None`` (not given) leaves the engine's own default.
_ENGINE_OPTIONS = {"batch_size": "max_batch_size", "tensor_parallel_size": "tensor_parallel_size",
                   "gpu_memory_utilization": "gpu_memory_utilization", "max_model_len": "max_model_len",
                   "base_url": "base_url", "api_key": "api_key", "served_model": "served_model",
                   "tokenizer": "tokenizer", "max_concurrency": "max_concurrency", "request_timeout": "request_timeout"}


def _add_engine_options(p: argparse.ArgumentParser) -> None:
    """Engine options: each reaches the engine only when given (:func:`engine_options`)."""
    p.add_argument("--batch-size", type=positive_int, default=None, metavar="N",
                   help="hf engine: most sequences per generate call (default: 64)")
    p.add_argument("--tensor-parallel-size", type=positive_int, default=None, metavar="N",
                   help="vllm: GPUs one model is split over (default: 1)")
    p.add_argument("--data-parallel-size", type=int, default=1, help=argparse.SUPPRESS)  # replaced by --ray --replicas
    p.add_argument("--gpu-memory-utilization", type=float_in(0.0, 1.0, low_open=True), default=None, metavar="F",
                   help="vllm: share of GPU memory it may take (default: 0.9)")
    p.add_argument("--max-model-len", type=positive_int, default=None, metavar="N",
                   help="vllm: longest prompt + response (default: the model's)")
    # --- openai: a server (vllm serve, SGLang, a router in front of many; pr1_eval.engines.openai_engine) ---
    p.add_argument("--base-url", default=None, metavar="URL",
                   help="openai: the server's OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1 (recorded in "
                        "run.json without any user or password)")
    p.add_argument("--api-key", default=None, metavar="KEY",
                   help="openai: the server's key (default: $OPENAI_API_KEY); never written to run.json")
    p.add_argument("--served-model", default=None, metavar="NAME",
                   help="openai: the model name the server serves (default: the one named like --model, else the "
                        "only one it lists)")
    p.add_argument("--tokenizer", default=None, metavar="DIR",
                   help="openai: folder (or hub id) of the tokenizer and chat template that render the prompts "
                        "(default: --model)")
    p.add_argument("--max-concurrency", type=int, default=None, metavar="N",
                   help="openai: requests in flight at once (default: 64)")
    p.add_argument("--request-timeout", type=float, default=None, metavar="S",
                   help="openai: seconds one request may take before it is retried (default: 1800)")


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
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a whole number at least 1 or 'auto', got {text!r}") from None


def run_config(args: argparse.Namespace, **overrides: Any) -> RunConfig:
    """The ``RunConfig`` these options describe: every field the parser defines under its own name
    (``-k``, ``--seed``, ``--max-blocks``, ``--ray`` …), the tasks parsed, the engine options the
    user gave, then ``overrides``. ``run`` and ``sweep`` both build their configs here, so an option
    added to :func:`add_generation_options` reaches both."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(RunConfig) if hasattr(args, f.name)}
    values.update(tasks=parse_task_list(args.tasks), engine_options=engine_options(args), **overrides)
    return RunConfig(**values)


def engine_options(args: argparse.Namespace) -> dict[str, object]:
    """The engine options given on the command line, by the engine's names: an option left out
    keeps the engine's default, and one that does not apply to the named ``--engine`` is refused
    there (:func:`pr1_eval.engines.factory.make_engine`)."""
    if getattr(args, "data_parallel_size", 1) != 1:
        raise Pr1EvalError("--data-parallel-size is gone: pass --ray --replicas N (one engine per Ray replica, on one "
                           "node or many; see docs/guides/scale-out.md)")
    return {name: getattr(args, option) for option, name in _ENGINE_OPTIONS.items()
            if getattr(args, option, None) is not None}
