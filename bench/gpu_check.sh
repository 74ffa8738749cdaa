#!/usr/bin/env bash
# GPU check: the HF path on CUDA (always), then vLLM (when it is importable in this Python).
#
# Run from the repository root on a CUDA machine. Nothing is downloaded: the trained tiny model is
# built locally (pr1_eval.testing.tiny_model), or set MODEL to a Parallel-R1 checkpoint directory for the
# real figures. Results land in $OUT (default ./gpu_check_out).
#
#   bash bench/gpu_check.sh                                   # HF checks; vLLM ones if vllm imports
#   PYTHON=.venv-vllm/bin/python MODEL=/ckpt/parallel-r1-unseen-s2 bash bench/gpu_check.sh
#
# 1. HF sequential and structured decoding on CUDA in float32 and bfloat16: recorded log-probs
#    against one teacher-forced forward (causal / structured mask), float32 within 1e-4; a seed
#    reproduces structured samples on the device; the HF engine's throughput against a bare
#    model.generate on the same batch (warmed up, alternated, best of 3)  -> $OUT/hf_check.json
# 2. the CUDA-parametrised consistency tests (tests/pr1_eval/decoding/test_structured.py -k cuda)
# 3. with vllm: engine contract, seeds, fork-join on real vLLM, then bench/bench_vllm.py
#
# Budget: about 3-5 minutes with the tiny model on one H100/H200 (K/PROBLEMS/MAX_NEW size the vLLM
# part; a 4B checkpoint needs them lower to fit a short lease).
set -euo pipefail
PY=${PYTHON:-python}
OUT=${OUT:-gpu_check_out}
K=${K:-8}
PROBLEMS=${PROBLEMS:-16}
MAX_NEW=${MAX_NEW:-512}
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -n "${MODEL:-}" ]; then MODEL_ARGS=(--model "$MODEL"); else MODEL_ARGS=(); fi

echo "== environment"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" - <<'PY'
import importlib.util, torch, transformers
vllm = "not installed"
if importlib.util.find_spec("vllm") is not None:
    import vllm as _v
    vllm = _v.__version__
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available(),
      "| transformers", transformers.__version__, "| vllm", vllm)
assert torch.cuda.is_available(), "no CUDA device visible"
PY

echo "== HF decoding on CUDA: float32 / bfloat16 consistency, seeds, engine vs bare generate"
"$PY" bench/gpu_hf_check.py "${MODEL_ARGS[@]}" --json "$OUT/hf_check.json"

echo "== consistency tests on CUDA"
if "$PY" -c "import pytest, hypothesis" 2>/dev/null; then
    "$PY" -m pytest -q -p no:cacheprovider tests/pr1_eval/decoding/test_structured.py -k cuda
else
    echo "pytest/hypothesis not installed in this Python: skipped (pip install -e '.[dev]')"
fi

if ! "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"; then
    echo "== vllm is not importable in this Python: vLLM checks skipped (install pr1-eval[vllm] in a GPU environment)"
    echo "== done: $OUT"
    exit 0
fi

echo "== correctness on real vLLM (tiny trained model unless MODEL is set)"
"$PY" - "$OUT" <<'PY'
import json, os, sys
from pr1_eval.decoding.base import SequentialDecoder
from pr1_eval.decoding.forkjoin import ForkJoinDecoder
from pr1_eval.engines.base import GenerationRequest, SamplingConfig
from pr1_eval.engines.factory import make_engine, resolve_engine_name
from pr1_eval.protocol.parse import parse_structure
from pr1_eval.protocol.tags import resolve_tag_ids
from pr1_eval.protocol import tags as T

out_dir = sys.argv[1]
model = os.environ.get("MODEL")
if not model:
    from pr1_eval.testing.tiny_model import cached_tiny_model
    model = str(cached_tiny_model("trained"))
assert resolve_engine_name("auto") == "vllm", "auto should pick vLLM with CUDA and vllm present"
engine = make_engine("vllm", model, gpu_memory_utilization=0.6, record_logprobs=True)
tok = engine.tokenizer
tags = resolve_tag_ids(tok)
msgs = [[{"role": "user", "content": f"Solve step by step with parallel thinking.\nProblem: What is {a} + {b}?"}]
        for a, b in [(3, 4), (12, 30), (25, 17), (8, 9)]]
prompts = [tok(tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True), add_special_tokens=False)["input_ids"]
           for m in msgs]
ids = [f"check/{i}" for i in range(len(prompts))]
sampling = SamplingConfig(max_new_tokens=256, seed=0)
report = {"model": model, "engine": engine.describe()}

# stop tokens are kept and reported; EOS is dropped; text keeps the special tags
req = GenerationRequest("stop", prompts[0] + [tags[T.PARALLEL_OPEN], tags[T.PATH_OPEN]], n=8, max_new_tokens=200,
                        stop_token_ids=(tags[T.PATH_CLOSE],), seed=1)
comps = engine.generate([req], sampling)[0]
assert all(c.token_ids[-1] == tags[T.PATH_CLOSE] for c in comps if c.finish_reason == "stop")
assert all(c.text == tok.decode(c.token_ids, skip_special_tokens=False) for c in comps)
assert all(c.logprobs is not None and len(c.logprobs) == len(c.token_ids) for c in comps)
report["stop_finish"] = [c.finish_reason for c in comps]

# seeds: the same request alone or batched with others (informational: GPU kernels are not batch-invariant)
a = SequentialDecoder().decode(engine, prompts, 4, sampling, ids)
b = SequentialDecoder().decode(engine, prompts[2:], 4, sampling, ids[2:])
report["seeded_reproducible"] = [s.token_ids for s in a[2]] == [s.token_ids for s in b[0]]

fj = ForkJoinDecoder().decode(engine, prompts, 4, sampling, ids)
samples = [s for g in fj for s in g]
parsed = [parse_structure(s.text) for s in samples]
report["forkjoin"] = {
    "format_ok": sum(p.format_ok for p in parsed), "with_block": sum(p.has_parallel for p in parsed), "n": len(samples),
    "engine_calls": [s.engine_calls for s in samples], "inserted": sum(s.engine_inserted_tokens for s in samples),
    "critical_le_tokens": all((s.critical_path_tokens or 0) <= len(s.token_ids) for s in samples),
    "within_budget": all(len(s.token_ids) <= sampling.max_new_tokens for s in samples),
    "blocks_within_cap": all(p.n_blocks <= 4 for p in parsed),
}
print(json.dumps(report, indent=1)[:3000])
json.dump(report, open(os.path.join(out_dir, "correctness.json"), "w"), indent=1)
assert report["forkjoin"]["within_budget"] and report["forkjoin"]["critical_le_tokens"]
assert report["forkjoin"]["blocks_within_cap"]
if not os.environ.get("MODEL"):
    assert report["forkjoin"]["with_block"] > 0, "the trained tiny model should branch under fork-join"
print("correctness: OK (seeded_reproducible=%s)" % report["seeded_reproducible"])
PY

echo "== throughput (bare LLM.generate vs pr1-eval) and fork-join latency"
if [ -z "${MODEL:-}" ]; then MODEL_ARGS=(--tiny); fi
"$PY" bench/bench_vllm.py "${MODEL_ARGS[@]}" -k "$K" --problems "$PROBLEMS" \
    --max-new-tokens "$MAX_NEW" --latency-problems 5 --json "$OUT/bench_vllm.json"
echo "== done: $OUT"
