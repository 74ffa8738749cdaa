"""CPU bench: fork-join (and structured) decoding against sequential, with the trained tiny model.

Why: fork-join costs extra engine calls (three per block) and re-sends the context each wave; on
a parallel engine it buys a shorter critical path. This measures, in one process and against the
sequential baseline measured here too: wall-clock per generated token, engine calls, and the
critical-path share of the tokens. Tokens differ between modes (sampling differs), so time is
compared per generated token ("at equal generated tokens").

    .venv/bin/python bench/bench_forkjoin.py --problems 8 -k 4 --max-new-tokens 192

Prints one table; ``--json FILE`` also writes the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pr1_eval.decoding.factory import make_decoder
from pr1_eval.engines.base import Completion, GenerationRequest, SamplingConfig
from pr1_eval.engines.hf import HFEngine
from pr1_eval.testing.tiny_model import cached_tiny_model


@dataclass
class CountingEngine:
    """Wraps an engine to count its ``generate`` calls (what a wave costs)."""

    inner: HFEngine
    calls: int = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def tokenizer(self) -> Any:
        return self.inner.tokenizer

    @property
    def model(self) -> Any:
        return self.inner.model

    @property
    def max_batch_size(self) -> int:
        return self.inner.max_batch_size

    @property
    def eos_token_ids(self) -> set[int]:
        return self.inner.eos_token_ids

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        self.calls += 1
        return self.inner.generate(requests, sampling)


def prompts_for(engine: HFEngine, n: int) -> list[list[int]]:
    tok = engine.tokenizer
    pairs = [(3 + 7 * i, 5 + 11 * i) for i in range(n)]
    messages = [[{"role": "user", "content": f"Solve step by step with parallel thinking.\nProblem: What is {a} + {b}?"}]
                for a, b in pairs]
    return [tok(tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True), add_special_tokens=False)["input_ids"]
            for m in messages]


def run_mode(engine: CountingEngine, mode: str, prompts: list[list[int]], k: int, sampling: SamplingConfig) -> dict[str, Any]:
    decoder = make_decoder(mode)
    engine.calls = 0
    start = time.perf_counter()
    out = decoder.decode(engine, prompts, k, sampling, [f"bench/{i}" for i in range(len(prompts))])  # type: ignore[arg-type]
    wall = time.perf_counter() - start
    samples = [s for group in out for s in group]
    tokens = sum(len(s.token_ids) for s in samples)
    critical = sum(s.critical_path_tokens or len(s.token_ids) for s in samples)
    return {
        "mode": mode, "wall_s": wall, "tokens": tokens, "ms_per_token": 1000 * wall / max(tokens, 1),
        "engine_calls": engine.calls, "calls_per_sample": statistics.mean(s.engine_calls for s in samples),
        "critical_share": critical / max(tokens, 1), "samples": len(samples),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=8)
    parser.add_argument("-k", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=192)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest for the tiny model)")
    parser.add_argument("--modes", default="sequential,forkjoin,structured")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    engine = CountingEngine(HFEngine(str(cached_tiny_model("trained")), device="cpu", dtype="float32", max_batch_size=64))
    prompts = prompts_for(engine.inner, args.problems)
    sampling = SamplingConfig(max_new_tokens=args.max_new_tokens, seed=0)
    run_mode(engine, "sequential", prompts[:1], 1, SamplingConfig(max_new_tokens=8, seed=0))  # warm-up
    rows = [run_mode(engine, mode, prompts, args.k, sampling) for mode in args.modes.split(",")]
    base = next(r for r in rows if r["mode"] == "sequential")
    print(f"tiny trained model, {args.problems} problems x k={args.k}, max_new_tokens={args.max_new_tokens}, "
          f"threads={args.threads}")
    print(f"{'mode':<11} {'wall s':>7} {'tokens':>7} {'ms/tok':>7} {'x seq':>6} {'calls':>6} {'x seq':>6} "
          f"{'calls/smp':>9} {'crit/tok':>8}")
    for r in rows:
        r["ms_per_token_ratio"] = r["ms_per_token"] / base["ms_per_token"]
        r["engine_calls_ratio"] = r["engine_calls"] / max(base["engine_calls"], 1)
        print(f"{r['mode']:<11} {r['wall_s']:7.2f} {r['tokens']:7d} {r['ms_per_token']:7.2f} {r['ms_per_token_ratio']:6.2f} "
              f"{r['engine_calls']:6d} {r['engine_calls_ratio']:6.1f} {r['calls_per_sample']:9.2f} {r['critical_share']:8.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "rows": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
