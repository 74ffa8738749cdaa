#!/usr/bin/env bash
# The first real vLLM under pr1-eval: the carried vLLM 0.24.0 (bench/vllm_carry.py) on the trained
# tiny model, on a GPU machine with no network. Each part prints one RESULT (or SKIP/FAIL) line;
# logs and JSON land in $OUT (default ./gpu-out): summary.txt, logs.txt, agree.json,
# bench_vllm.json, runs.json (at most 8 files come back from a call).
#
#   bash bench/gpu_vllm_check.sh                 # after `vllm_carry.py install --target /tmp/site`
#   DRY_RUN=1 bash bench/gpu_vllm_check.sh       # print the commands, run nothing (CPU test)
#
# Parts: carried imports; bare LLM(...).generate; pr1-eval run --engine vllm sequential and
# fork-join on AIME problems with k = K; vLLM-vs-HF agreement (greedy tokens, sampled log-probs,
# float32); bench/bench_vllm.py (engine vs bare LLM.generate, fork-join vs sequential latency);
# a two-replica --ray run when ray imports and two GPUs are visible. BUDGET_S caps the whole
# (default 480 s, so park + install (about a minute) + check fit one call of timeout_s 600): a part
# that would start past it is skipped, and each part's timeout is cut to what the budget leaves. bench/gpu_check.sh (HF on CUDA, then vLLM correctness)
# is the longer check for a machine that has vLLM installed.
set -uo pipefail
PY=${PYTHON:-python3}
OUT=${OUT:-./gpu-out}
SITE=${SITE:-/tmp/site}
K=${K:-4}
PROBLEMS=${PROBLEMS:-4}
MAX_NEW=${MAX_NEW:-256}
BUDGET_S=${BUDGET_S:-480}
DRY_RUN=${DRY_RUN:-0}
RUNS=${RUNS:-/tmp/gpu-vllm-runs}
mkdir -p "$OUT"
# FlashInfer is not carried: its sampler must stay off (vLLM imports it in the sampler's constructor).
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}" VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 \
    DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
SUMMARY="$OUT/summary.txt"
LOGS="$OUT/logs.txt"
: >"$SUMMARY"
: >"$LOGS"
START=$(date +%s)

say() { echo "$*" | tee -a "$SUMMARY"; }

# part NAME TIMEOUT_S COMMAND...: run it, log it, print its RESULT line (or why there is none)
part() {
    local name=$1 limit=$2
    shift 2
    if [ "$DRY_RUN" = 1 ]; then
        say "DRY $name (timeout ${limit}s): $*"
        return 0
    fi
    local elapsed=$(($(date +%s) - START))
    if [ $((elapsed + 20)) -ge "$BUDGET_S" ]; then
        say "SKIP $name: budget spent (${elapsed}s of ${BUDGET_S}s)"
        return 0
    fi
    local left=$((BUDGET_S - elapsed))
    [ "$limit" -gt "$left" ] && limit=$left  # no part runs past the budget
    local log="$RUNS/$name.log" t0 rc
    t0=$(date +%s)
    timeout "$limit" "$@" >"$log" 2>&1
    rc=$?
    { echo "===== $name (rc=$rc, $(($(date +%s) - t0))s): $*"; tail -c 20000 "$log"; } >>"$LOGS"
    if grep -q '^RESULT' "$log"; then
        say "$(grep '^RESULT' "$log" | tail -1) [$(($(date +%s) - t0))s]"
    fi
    if [ "$rc" != 0 ]; then
        say "FAIL $name: rc=$rc ($([ "$rc" = 124 ] && echo "timed out after ${limit}s" || tail -n 1 "$log" | cut -c1-300))"
    fi
}

mkdir -p "$RUNS"
say "== gpu_vllm_check: $(date -u +%FT%TZ) K=$K PROBLEMS=$PROBLEMS MAX_NEW=$MAX_NEW BUDGET_S=$BUDGET_S SITE=$SITE"
[ "$DRY_RUN" = 1 ] || say "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"

part imports 60 "$PY" bench/vllm_carry.py check
part tiny-model 240 "$PY" -c "from pr1_eval.testing.tiny_model import cached_tiny_model as c; p = c('trained'); print('RESULT tiny-model:', p)"
part smoke 240 "$PY" bench/gpu_vllm_parts.py smoke
RUN_ARGS=(--tasks aime24 --limit "$PROBLEMS" -k "$K" --engine vllm --max-new-tokens "$MAX_NEW"
          --gpu-memory-utilization 0.3 --data-source packaged)
MODEL_ARG="\$($PY -c \"from pr1_eval.testing.tiny_model import cached_tiny_model as c; print(c('trained'))\")"
for decoding in sequential forkjoin; do
    part "run-$decoding" 200 bash -c "set -o pipefail; $PY -m pr1_eval run --model $MODEL_ARG ${RUN_ARGS[*]} --decoding $decoding \
        --out $RUNS/$decoding && $PY -m pr1_eval report $RUNS/$decoding --json > $RUNS/$decoding.json && \
        $PY bench/gpu_vllm_parts.py summary --json $RUNS/$decoding.json --name run-$decoding"
done
part agree 240 "$PY" bench/gpu_vllm_parts.py agree --problems "$PROBLEMS" --max-new-tokens 128 --json "$OUT/agree.json"
part bench 240 bash -c "$PY bench/bench_vllm.py --tiny -k $K --problems 8 --max-new-tokens $MAX_NEW --repeats 2 \
    --latency-problems 3 --gpu-memory-utilization 0.3 --json $OUT/bench_vllm.json && \
    $PY -c \"import json; r=json.load(open('$OUT/bench_vllm.json')); t=r['throughput']; \
print('RESULT bench: pr1 %.0f vs bare %.0f tok/s, overhead %.1f%%, fork-join/sequential latency %.2f' % \
(t['pr1_tokens_per_s'], t['bare_tokens_per_s'], 100 * t['overhead'], r['latency']['median_forkjoin_over_sequential']))\""
if [ "$DRY_RUN" != 1 ] && ! "$PY" -c "import ray" 2>/dev/null; then
    say "SKIP ray: ray is not carried (79 MB wheel, two more calls: bench/vllm_carry.py --with-ray)"
elif [ "$DRY_RUN" != 1 ] && [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -lt 2 ]; then
    say "SKIP ray: one GPU; two vLLM replicas need two (--gpus-per-replica is a whole number)"
else
    part ray 240 bash -c "$PY -m pr1_eval run --model $MODEL_ARG ${RUN_ARGS[*]} --ray --replicas 2 --out $RUNS/ray && \
        echo 'RESULT ray: two replicas, run complete'"
fi
[ "$DRY_RUN" = 1 ] || cat "$RUNS"/*.json 2>/dev/null | head -c 15000000 >"$OUT/runs.json"
say "== done in $(($(date +%s) - START))s: $OUT"
