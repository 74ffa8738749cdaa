"""GPU check of the HF path (no vLLM needed): decoding on CUDA in float32 and bfloat16, and the
HF engine's overhead over a bare ``model.generate``.

Why: structured decoding once crashed on CUDA (CPU generators on CUDA logits), and nothing tied
the decoders' recorded log-probs to the model on a GPU. For each dtype this decodes with the HF
engine on the device and compares the recorded log-probs with one teacher-forced forward of the
same model — a causal forward for sequential decoding, the structured mask for structured
decoding — and reports the largest and mean gap (float32 must stay under 1e-4; bfloat16 is
reported). It also checks that a seed reproduces structured samples on the device. Throughput:
the HF engine's ``generate`` against a bare ``model.generate`` on the same left-padded batch
(greedy, so both produce the same tokens), each warmed up, alternated, best of 3.

    python bench/gpu_hf_check.py --json out.json                 # the trained tiny model, CUDA
    python bench/gpu_hf_check.py --model CKPT --max-new-tokens 256
    python bench/gpu_hf_check.py --device cpu                     # smoke test of the script itself
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

import torch

from pr1_eval.decoding.base import DecodedSample, SequentialDecoder, request_seed
from pr1_eval.decoding.structured import StructuredDecoder
from pr1_eval.engines.base import GenerationRequest, SamplingConfig
from pr1_eval.engines.hf import HFEngine
from pr1_eval.protocol.mask import additive_mask, build_mask_and_positions
from pr1_eval.protocol.parse import parse_structure
from pr1_eval.protocol.tags import resolve_tag_ids

PROBLEMS = [(3, 4), (12, 30), (25, 17), (8, 9), (41, 2), (7, 7), (19, 23), (5, 60)]


def prompts_for(engine: HFEngine, n: int) -> list[list[int]]:
    tok = engine.tokenizer
    texts = [tok.apply_chat_template([{"role": "user", "content": f"Solve step by step with parallel thinking.\n"
                                                                  f"Problem: What is {a} + {b}?"}],
                                     tokenize=False, add_generation_prompt=True) for a, b in PROBLEMS[:n]]
    return [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def forward_logprobs(model: Any, prompt: list[int], response: list[int], structured: bool, tags: dict[str, int]) -> torch.Tensor:
    """Log-probs of ``response`` under one teacher-forced forward (structured mask or causal)."""
    device, dtype = next(model.parameters()).device, next(model.parameters()).dtype
    ids = torch.tensor([prompt + response], device=device)
    kwargs: dict[str, Any] = {}
    if structured:
        mask, pos = build_mask_and_positions(prompt + response, tags, response_start=len(prompt), device=device)
        kwargs = {"attention_mask": additive_mask(mask[None, None], dtype), "position_ids": pos[None]}
    with torch.no_grad():
        logits = model(input_ids=ids, **kwargs).logits[0].float()
    lp = logits[len(prompt) - 1 : -1].log_softmax(-1)
    return lp.gather(-1, torch.tensor(response, device=device)[:, None]).squeeze(-1).cpu()


def consistency(engine: HFEngine, prompts: Sequence[list[int]], out: list[list[DecodedSample]], structured: bool) -> dict[str, Any]:
    tags = resolve_tag_ids(engine.tokenizer)
    gaps = []
    for prompt, samples in zip(prompts, out, strict=True):
        for s in samples:
            if not s.token_ids or s.logprobs is None:
                continue
            expected = forward_logprobs(engine.model, prompt, s.token_ids, structured, tags)
            gaps.append((torch.tensor(s.logprobs) - expected).abs())
    flat = torch.cat(gaps) if gaps else torch.zeros(1)
    branched = sum(any(len(b.paths) >= 2 for b in parse_structure(s.text).blocks) for g in out for s in g)
    return {"max_abs_gap": float(flat.max()), "mean_abs_gap": float(flat.mean()), "tokens": int(flat.numel()),
            "samples": sum(len(g) for g in out), "branched": branched}


def decode_checks(model_path: str, device: str, dtype: str, n: int, k: int, max_new: int) -> dict[str, Any]:
    engine = HFEngine(model_path, device=device, dtype=dtype, max_batch_size=64, record_logprobs=True)
    prompts = prompts_for(engine, n)
    ids = [f"gpu/{i}" for i in range(n)]
    sampling = SamplingConfig(max_new_tokens=max_new, seed=0)
    start = time.perf_counter()
    seq = SequentialDecoder().decode(engine, prompts, k, sampling, ids)
    seq_s = time.perf_counter() - start
    start = time.perf_counter()
    structured = StructuredDecoder().decode(engine, prompts, k, sampling, ids)
    st_s = time.perf_counter() - start
    again = StructuredDecoder().decode(engine, prompts, k, sampling, ids)
    report = {
        "dtype": dtype, "device": engine.device,
        "sequential": {**consistency(engine, prompts, seq, structured=False), "seconds": round(seq_s, 2)},
        "structured": {**consistency(engine, prompts, structured, structured=True), "seconds": round(st_s, 2),
                       "seed_reproducible": [[s.token_ids for s in g] for g in structured]
                       == [[s.token_ids for s in g] for g in again]},
    }
    del engine
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return report


def throughput(model_path: str, device: str, dtype: str, n: int, k: int, max_new: int, rounds: int = 3) -> dict[str, Any]:
    """HF engine vs bare ``model.generate`` on the same batch: warmed up, alternated, best of ``rounds``."""
    engine = HFEngine(model_path, device=device, dtype=dtype, max_batch_size=max(64, n * k))
    prompts = prompts_for(engine, n)
    greedy = SamplingConfig(temperature=0.0, max_new_tokens=max_new, seed=0)
    requests = [GenerationRequest(f"t/{i}", p, n=k, seed=request_seed(0, f"t/{i}")) for i, p in enumerate(prompts)]
    rows = [p for p in prompts for _ in range(k)]
    width = max(len(p) for p in rows)
    pad = engine.pad_token_id
    input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in rows], device=engine.device)
    attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in rows], device=engine.device)

    def run_engine() -> int:
        out = engine.generate(requests, greedy)
        return sum(len(c.token_ids) for cs in out for c in cs)

    def run_bare() -> int:
        with torch.no_grad():
            seqs = engine.model.generate(input_ids=input_ids, attention_mask=attention, do_sample=False,
                                         max_new_tokens=max_new, eos_token_id=sorted(engine.eos_token_ids),
                                         pad_token_id=pad)
        new = seqs[:, width:]
        return int(((new != pad) & ~torch.isin(new, torch.tensor(sorted(engine.eos_token_ids), device=new.device))).sum())

    def timed(fn: Any) -> tuple[float, int]:
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        tokens = fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - start, tokens

    run_engine(), run_bare()  # warm-up (kernels, allocator, caches)
    best = {"engine": float("inf"), "bare": float("inf")}
    tokens = {"engine": 0, "bare": 0}
    for _ in range(rounds):
        for name, fn in (("engine", run_engine), ("bare", run_bare)):
            seconds, n_tokens = timed(fn)
            best[name] = min(best[name], seconds)
            tokens[name] = n_tokens
    return {
        "dtype": dtype, "rows": len(rows), "max_new_tokens": max_new,
        "engine_tokens_per_s": tokens["engine"] / best["engine"], "bare_tokens_per_s": tokens["bare"] / best["bare"],
        "engine_best_s": best["engine"], "bare_best_s": best["bare"], "tokens": tokens,
        "engine_over_bare_time": best["engine"] / best["bare"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="checkpoint (default: the trained tiny model, built locally)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--problems", type=int, default=4)
    parser.add_argument("-k", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--throughput-problems", type=int, default=8)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible; pass --device cpu for a smoke test")
    model = args.model
    if model is None:
        from pr1_eval.testing.tiny_model import cached_tiny_model

        model = str(cached_tiny_model("trained"))
    report: dict[str, Any] = {"model": model, "torch": torch.__version__, "decoding": [], "throughput": []}
    for dtype in ("float32", "bfloat16"):
        report["decoding"].append(decode_checks(model, args.device, dtype, args.problems, args.k, args.max_new_tokens))
        report["throughput"].append(throughput(model, args.device, dtype, args.throughput_problems, args.k,
                                               args.max_new_tokens))
    print(f"{'dtype':9s} {'decoding':11s} {'max |gap|':>10s} {'mean |gap|':>11s} {'tokens':>7s} {'branched':>8s} {'s':>6s}")
    for d in report["decoding"]:
        for mode in ("sequential", "structured"):
            r = d[mode]
            print(f"{d['dtype']:9s} {mode:11s} {r['max_abs_gap']:10.2e} {r['mean_abs_gap']:11.2e} {r['tokens']:7d} "
                  f"{r['branched']:8d} {r['seconds']:6.1f}")
    print(f"\n{'dtype':9s} {'rows':>5s} {'engine tok/s':>13s} {'bare tok/s':>11s} {'engine/bare time':>17s}")
    for t in report["throughput"]:
        print(f"{t['dtype']:9s} {t['rows']:5d} {t['engine_tokens_per_s']:13.1f} {t['bare_tokens_per_s']:11.1f} "
              f"{t['engine_over_bare_time']:17.2f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)
    fp32 = next(d for d in report["decoding"] if d["dtype"] == "float32")
    problems = [f"{mode} float32 gap {fp32[mode]['max_abs_gap']:.2e} > 1e-4" for mode in ("sequential", "structured")
                if fp32[mode]["max_abs_gap"] > 1e-4]
    problems += [f"structured {d['dtype']} not reproducible for one seed" for d in report["decoding"]
                 if not d["structured"]["seed_reproducible"]]
    if problems:
        raise SystemExit("FAILED: " + "; ".join(problems))
    print("\nHF decoding checks: OK")


if __name__ == "__main__":
    main()
