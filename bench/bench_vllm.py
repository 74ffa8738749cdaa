"""GPU bench: pr1-eval's vLLM engine against a bare ``LLM.generate`` loop, and fork-join latency.

Why: the harness must not cost throughput (target: overhead under 10% against calling vLLM
directly on the same prompts with the same sampling), and fork-join's promise is a shorter
wall-clock per problem than sequential decoding on a parallel engine. Both are measured here:

1. throughput — the same token prompts, ``SamplingParams(n=k)`` one request per problem, same
   seeds, so both sides generate the same tokens; bare loop vs ``SequentialDecoder`` over
   :class:`~pr1_eval.engines.vllm_engine.VLLMEngine` (the bare loop uses the engine's own
   ``LLM``, so the model is loaded once). Alternated ``--repeats`` times after a warm-up, best
   of each reported (prefix caching makes repeats equally warm for both);
2. latency — per problem (k samples), fork-join vs sequential wall-clock, median over problems.

    python bench/bench_vllm.py --model /path/to/Parallel-R1-checkpoint -k 16 --problems 30
    python bench/bench_vllm.py --tiny  # the trained tiny model (builds it if needed)

Needs CUDA and vllm (``pip install 'pr1-eval[vllm]'``). Prints a summary; ``--json`` writes it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pr1_eval.decoding.base import SequentialDecoder, request_seed
from pr1_eval.decoding.forkjoin import ForkJoinDecoder
from pr1_eval.engines.base import SamplingConfig
from pr1_eval.engines.vllm_engine import VLLMEngine


def load_problems(n: int) -> list[str]:
    """The first ``n`` problems of the packaged benchmarks (AIME first, then MATH-500 to fill ``n``)."""
    from pr1_eval.inputs.tasks import load_task

    texts = [p.problem for name in ("aime24", "aime25", "math500") for p in load_task(name, source="packaged").problems]
    return texts[:n]


def render(engine: VLLMEngine, problems: list[str]) -> list[list[int]]:
    from pr1_eval.inputs.prompts import apply_chat, load_template

    template, tok = load_template("parallel_r1_v3"), engine.tokenizer
    return [tok(apply_chat(tok, template.render(problem)), add_special_tokens=False)["input_ids"] for problem in problems]


def bare_loop(engine: VLLMEngine, prompts: list[list[int]], ids: list[str], k: int, sampling: SamplingConfig) -> tuple[float, int]:
    """What a user would write without pr1-eval: one generate call, decode the text."""
    vllm = engine._vllm
    params = [vllm.SamplingParams(n=k, temperature=sampling.temperature, top_p=sampling.top_p, top_k=-1,
                                  max_tokens=sampling.max_new_tokens, seed=request_seed(sampling.seed, rid),
                                  skip_special_tokens=False) for rid in ids]
    start = time.perf_counter()
    outs = engine._llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    texts = [o.text for out in outs for o in out.outputs]
    wall = time.perf_counter() - start
    assert len(texts) == len(prompts) * k
    return wall, sum(len(o.token_ids) for out in outs for o in out.outputs)


def through_pr1(engine: VLLMEngine, prompts: list[list[int]], ids: list[str], k: int, sampling: SamplingConfig) -> tuple[float, int]:
    start = time.perf_counter()
    out = SequentialDecoder().decode(engine, prompts, k, sampling, ids)
    wall = time.perf_counter() - start
    # vLLM counts the final EOS token; pr1-eval drops it from token_ids
    return wall, sum(len(s.token_ids) + (s.finish_reason == "eos") for group in out for s in group)


def throughput(engine: VLLMEngine, prompts: list[list[int]], k: int, sampling: SamplingConfig, repeats: int) -> dict[str, Any]:
    ids = [f"bench/{i}" for i in range(len(prompts))]
    bare_loop(engine, prompts[:2], ids[:2], 2, SamplingConfig(max_new_tokens=16, seed=1))  # warm-up
    bare, pr1 = [], []
    for _ in range(repeats):
        bare.append(bare_loop(engine, prompts, ids, k, sampling))
        pr1.append(through_pr1(engine, prompts, ids, k, sampling))
    best_bare = max(tokens / wall for wall, tokens in bare)
    best_pr1 = max(tokens / wall for wall, tokens in pr1)
    return {"bare_tokens_per_s": best_bare, "pr1_tokens_per_s": best_pr1, "overhead": 1 - best_pr1 / best_bare,
            "bare_tokens": bare[0][1], "pr1_tokens": pr1[0][1]}


def latency(engine: VLLMEngine, prompts: list[list[int]], k: int, sampling: SamplingConfig, paths: int) -> dict[str, Any]:
    rows = []
    for i, prompt in enumerate(prompts):
        rid = [f"lat/{i}"]
        t0 = time.perf_counter()
        seq = SequentialDecoder().decode(engine, [prompt], k, sampling, rid)[0]
        t1 = time.perf_counter()
        fj = ForkJoinDecoder(paths=paths).decode(engine, [prompt], k, sampling, rid)[0]
        t2 = time.perf_counter()
        rows.append({"seq_s": t1 - t0, "fj_s": t2 - t1,
                     "seq_tokens": statistics.mean(len(s.token_ids) for s in seq),
                     "fj_tokens": statistics.mean(len(s.token_ids) for s in fj),
                     "fj_critical": statistics.mean(s.critical_path_tokens or 0 for s in fj),
                     "fj_calls": statistics.mean(s.engine_calls for s in fj)})
    ratio = statistics.median(r["fj_s"] / r["seq_s"] for r in rows)
    return {"median_forkjoin_over_sequential": ratio, "problems": rows}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--tiny", action="store_true", help="use the trained tiny model")
    parser.add_argument("--problems", type=int, default=30)
    parser.add_argument("-k", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=3000)
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    parser.add_argument("--max-model-len", type=int, default=None, help="default: the model's own")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--latency-problems", type=int, default=5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    model = args.model
    if args.tiny or model is None:
        from pr1_eval.testing.tiny_model import cached_tiny_model

        model = str(cached_tiny_model("trained"))
    engine = VLLMEngine(model, tensor_parallel_size=args.tensor_parallel_size,
                        gpu_memory_utilization=args.gpu_memory_utilization, max_model_len=args.max_model_len)
    prompts = render(engine, load_problems(args.problems))
    sampling = SamplingConfig(max_new_tokens=args.max_new_tokens, seed=0)
    result = {"model": model, "args": vars(args), "engine": engine.describe(),
              "throughput": throughput(engine, prompts, args.k, sampling, args.repeats),
              "latency": latency(engine, prompts[: args.latency_problems], args.k, sampling, paths=2)}
    t, lat = result["throughput"], result["latency"]
    print(f"model={model} problems={len(prompts)} k={args.k} max_new_tokens={args.max_new_tokens}")
    print(f"bare LLM.generate : {t['bare_tokens_per_s']:10.0f} tok/s ({t['bare_tokens']} tokens)")
    print(f"pr1-eval engine   : {t['pr1_tokens_per_s']:10.0f} tok/s ({t['pr1_tokens']} tokens)")
    print(f"harness overhead  : {100 * t['overhead']:9.1f} %  (target < 10 %)")
    print(f"fork-join / sequential latency per problem (median of {len(lat['problems'])}): "
          f"{lat['median_forkjoin_over_sequential']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
