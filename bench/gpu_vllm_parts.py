"""The Python parts of ``bench/gpu_vllm_check.sh``: each prints one ``RESULT`` line with its figure.

Why: the first real vLLM under pr1-eval needs two answers the fake cannot give — does a bare
``LLM(...).generate`` run on the carried vLLM 0.24.0 at all, and does pr1-eval's vLLM engine agree
with its HF engine on the same model. Both are measured on the trained tiny model
(``pr1_eval.testing.tiny_model``, built there, nothing downloaded):

* ``smoke``: ``from vllm import LLM, SamplingParams``; ``LLM`` on the model; one ``generate`` of
  4 prompts × n=4 — import, load and generate seconds, tokens;
* ``agree``: both engines in float32 (vLLM casts a float32 checkpoint to half precision under
  ``dtype=auto``, which no exact comparison survives). Greedy: the same prompts decoded by each,
  how many responses are token-identical and the mean share of the common prefix. Sampled
  (temperature 1, top-p 1, no top-k: the only setting where vLLM's raw log-probs are the sampling
  distribution): vLLM's recorded log-probs of its own samples against one teacher-forced HF
  forward of the same tokens (``gpu_hf_check.forward_logprobs``), max and mean |gap|.

    python bench/gpu_vllm_parts.py smoke
    python bench/gpu_vllm_parts.py agree --problems 4 --max-new-tokens 128 --json out.json
    python bench/gpu_vllm_parts.py summary --json report.json --name run-forkjoin   # pr1-eval report --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

PROMPTS = [(3, 4), (12, 30), (25, 17), (8, 9), (41, 2), (7, 7), (19, 23), (5, 60)]


def tiny_model(model: str | None) -> str:
    if model:
        return model
    from pr1_eval.testing.tiny_model import cached_tiny_model

    return str(cached_tiny_model("trained"))


def prompt_ids(tokenizer: Any, n: int) -> list[list[int]]:
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": "Solve step by step with parallel thinking.\n"
                                             f"Problem: What is {a} + {b}?"}], tokenize=False, add_generation_prompt=True)
             for a, b in PROMPTS[:n]]
    return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]


def smoke(model: str, gpu_memory_utilization: float) -> dict[str, Any]:
    """Bare vLLM: import, LLM, one generate (what a user's first script does)."""
    t0 = time.perf_counter()
    import vllm
    from vllm import LLM, SamplingParams

    t1 = time.perf_counter()
    llm = LLM(model=model, gpu_memory_utilization=gpu_memory_utilization, seed=0)
    t2 = time.perf_counter()
    prompts = prompt_ids(llm.get_tokenizer(), 4)
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts],
                        SamplingParams(n=4, temperature=1.0, max_tokens=64, seed=0, skip_special_tokens=False),
                        use_tqdm=False)
    t3 = time.perf_counter()
    tokens = sum(len(o.token_ids) for out in outs for o in out.outputs)
    return {"vllm": vllm.__version__, "import_s": t1 - t0, "load_s": t2 - t1, "generate_s": t3 - t2,
            "tokens": tokens, "samples": sum(len(out.outputs) for out in outs)}


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def agree(model: str, problems: int, max_new: int, gpu_memory_utilization: float, device: str = "cuda") -> dict[str, Any]:
    """pr1-eval's vLLM engine against its HF engine, float32, greedy and sampled (see the docstring)."""
    import torch
    from gpu_hf_check import forward_logprobs

    from pr1_eval.engines.base import GenerationRequest, SamplingConfig
    from pr1_eval.engines.hf import HFEngine
    from pr1_eval.engines.vllm_engine import VLLMEngine

    vllm_engine = VLLMEngine(model, dtype="float32", gpu_memory_utilization=gpu_memory_utilization, record_logprobs=True)
    prompts = prompt_ids(vllm_engine.tokenizer, problems)
    greedy = SamplingConfig(temperature=0.0, max_new_tokens=max_new, seed=0)
    sampled = SamplingConfig(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=max_new, seed=0)
    requests = [GenerationRequest(f"agree/{i}", p, n=1, seed=i) for i, p in enumerate(prompts)]
    v_greedy = [cs[0] for cs in vllm_engine.generate(requests, greedy)]
    v_sampled = [c for cs in vllm_engine.generate([GenerationRequest(r.request_id, r.prompt_token_ids, n=4, seed=r.seed)
                                                   for r in requests], sampled) for c in cs]
    vllm_engine.close()
    hf = HFEngine(model, device=device, dtype="float32", record_logprobs=True)
    h_greedy = [cs[0] for cs in hf.generate(requests, greedy)]
    identical = sum(a.token_ids == b.token_ids for a, b in zip(v_greedy, h_greedy, strict=True))
    prefix = [common_prefix(a.token_ids, b.token_ids) / max(1, len(a.token_ids), len(b.token_ids))
              for a, b in zip(v_greedy, h_greedy, strict=True)]
    tags: dict[str, int] = {}
    gaps = []
    for index, completion in enumerate(v_sampled):
        if not completion.token_ids or completion.logprobs is None:
            continue
        expected = forward_logprobs(hf.model, prompts[index // 4], completion.token_ids, False, tags)
        got = torch.tensor(completion.logprobs, dtype=torch.float32)
        keep = ~torch.isnan(got)  # a kept stop token has no vLLM log-prob
        gaps.append((got[keep] - expected[keep]).abs())
    flat = torch.cat(gaps) if gaps else torch.zeros(1)
    return {"greedy_identical": identical, "greedy_n": len(prompts), "greedy_mean_prefix_share": sum(prefix) / len(prefix),
            "sampled_tokens": int(flat.numel()), "logprob_max_abs_gap": float(flat.max()),
            "logprob_mean_abs_gap": float(flat.mean()), "max_new_tokens": max_new}


def run_summary(name: str, report: dict[str, Any]) -> str:
    """One line from ``pr1-eval report --json``: per task, samples, accuracy, format, blocks, tokens."""
    from pr1_eval.report.schema import TaskMetrics  # the report's metric names

    cells = []
    for task, t in report.get("tasks", {}).items():
        mean, passed = (TaskMetrics.metric_key(name, t.get("k") or "k") for name in ("mean", "pass_at_k"))
        cells.append(f"{task} {t.get('n_samples')} samples ({'complete' if t.get('complete') else 'INCOMPLETE'}), "
                     f"{mean} {t.get(mean, float('nan')):.3f}, {passed} {t.get(passed, float('nan')):.3f}, "
                     f"format_ok {t.get('format_ok_ratio', float('nan')):.2f}, parallel {t.get('parallel_ratio', float('nan')):.2f}, "
                     f"tokens/sample {t.get('tokens_per_sample', float('nan')):.0f}, critical path "
                     f"{t.get('critical_path_tokens_per_sample', float('nan')):.0f}, engine calls "
                     f"{t.get('engine_calls_per_sample', float('nan')):.1f}")
    return f"RESULT {name}: status {report.get('status')}; " + "; ".join(cells)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("smoke", "agree", "summary"))
    parser.add_argument("--model", default=None, help="default: the trained tiny model, built locally")
    parser.add_argument("--problems", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    parser.add_argument("--device", default="cuda", help="agree: the HF engine's device (cpu: a test with a fake vllm)")
    parser.add_argument("--json", default=None, help="write the figures here (summary: the report to read)")
    parser.add_argument("--name", default="run", help="summary: the part's name in its RESULT line")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.part == "summary":
        print(run_summary(args.name, json.loads(Path(args.json).read_text())))
        return 0
    model = tiny_model(args.model)
    if args.part == "smoke":
        r = smoke(model, args.gpu_memory_utilization)
        line = (f"RESULT smoke: vllm {r['vllm']} import {r['import_s']:.1f} s, LLM() {r['load_s']:.1f} s, generate "
                f"{r['samples']} samples / {r['tokens']} tokens in {r['generate_s']:.2f} s")
    else:
        r = agree(model, args.problems, args.max_new_tokens, args.gpu_memory_utilization, args.device)
        line = (f"RESULT agree: greedy identical {r['greedy_identical']}/{r['greedy_n']} (mean common prefix "
                f"{100 * r['greedy_mean_prefix_share']:.0f}%), sampled log-probs vs HF forward max |gap| "
                f"{r['logprob_max_abs_gap']:.2e} mean {r['logprob_mean_abs_gap']:.2e} over {r['sampled_tokens']} tokens (float32)")
    if args.json:
        Path(args.json).write_text(json.dumps({"model": model, **r}, indent=1))
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
