"""Batched vs one-problem-at-a-time HF generation, on the trained tiny model (CPU).

Baseline: one ``generate`` call per problem (its k samples batched, as a naive loop would do).
Candidate: the HF engine's batching, all k samples of several problems in one call.
Both run in this process on the same prompts with the same budget; the ratio is what counts.

    python bench/bench_hf_batching.py [--problems 16] [-k 8] [--max-new-tokens 64]
"""

from __future__ import annotations

import argparse
import time

from pr1_eval.decoding.base import request_seed
from pr1_eval.engines.base import GenerationRequest, SamplingConfig
from pr1_eval.engines.hf import HFEngine
from pr1_eval.inputs.prompts import apply_chat, load_template
from pr1_eval.inputs.tasks import load_task
from pr1_eval.testing.tiny_model import cached_tiny_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--problems", type=int, default=16)
    parser.add_argument("-k", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args()
    engine = HFEngine(str(cached_tiny_model("trained")), max_batch_size=256)
    template = load_template("parallel_r1_v3")
    problems = load_task("gsm8k", limit=args.problems).problems
    prompts = [engine.tokenizer(apply_chat(engine.tokenizer, template.render(p.problem)), add_special_tokens=False)["input_ids"]
               for p in problems]
    sampling = SamplingConfig(max_new_tokens=args.max_new_tokens, seed=0)
    requests = [GenerationRequest(f"p{i}", ids, n=args.k, seed=request_seed(0, f"p{i}")) for i, ids in enumerate(prompts)]
    engine.generate(requests[:1], sampling)  # warm-up

    start = time.perf_counter()
    single = [engine.generate([r], sampling)[0] for r in requests]
    t_single = time.perf_counter() - start
    start = time.perf_counter()
    batched = engine.generate(requests, sampling)
    t_batched = time.perf_counter() - start

    tok_single = sum(len(c.token_ids) for cs in single for c in cs)
    tok_batched = sum(len(c.token_ids) for cs in batched for c in cs)
    print(f"{'mode':<28}{'seconds':>10}{'tokens':>10}{'tokens/s':>12}")
    print(f"{'one problem per call':<28}{t_single:>10.2f}{tok_single:>10}{tok_single / t_single:>12.1f}")
    print(f"{'all problems in one call':<28}{t_batched:>10.2f}{tok_batched:>10}{tok_batched / t_batched:>12.1f}")
    ratio = (tok_batched / t_batched) / (tok_single / t_single)
    print(f"throughput ratio batched / one-problem-per-call: {ratio:.2f}x "
          f"({args.problems} problems × k={args.k}, ≤{args.max_new_tokens} new tokens)")


if __name__ == "__main__":
    main()
