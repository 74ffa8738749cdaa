#!/usr/bin/env bash
# Bench smoke: run every CPU bench of bench/ at a small size, so a bench that no longer runs fails CI
# (.ci/run calls this before the tests). Sizes are the smallest that still exercise each bench's
# whole path (baseline, candidate, ratio); the figures printed at these sizes mean nothing.
#
# The benches are LISTED here on purpose, not globbed: new GPU-only scripts land in bench/ (they
# need CUDA and cannot run on a CPU CI machine), so a new CPU bench must be added to CPU_BENCHES
# and a new GPU one to GPU_ONLY with its reason. A script in bench/ named in neither list fails
# this step, so nothing is left out silently.
#
# Usage: bench/smoke.sh   (from the repository root, in the project's environment)
set -euo pipefail
cd "$(dirname "$0")/.."

# name|arguments (small size). Run in two lanes at once (the CI machine has two cores and most
# benches wait on child processes or model loads part of the time); the lanes are balanced by
# their measured times (CI at load ~2: lane 1 about 76 s, lane 2 about 80 s, before
# bench_same_outputs.py, about 12 s of CPU, joined lane 1): the first eight entries form lane 1,
# the rest lane 2.
LANE1=8
CPU_BENCHES=(
    "bench_kill_resume.py|--kills 1 --cut-parts 1 --limit 1 -k 1 --max-new-tokens 4"
    "bench_dashboard.py|--small"
    "bench_grading.py|--n 24 --workers 2"
    "bench_mask.py|--length 300 --prompt 20 --blocks 2 --paths 2 --repeat 1"
    "bench_hf_batching.py|--problems 2 -k 1 --max-new-tokens 4"
    "bench_forkjoin.py|--problems 1 -k 2 --max-new-tokens 8"
    "bench_rollout_runs.py|--rows 64 --n 8 --tokens 100"
    "bench_same_outputs.py|--small"
    "bench_ray.py|--problems 2 -k 1 --max-new-tokens 4 --sim-problems 64 --replicas 8 --repeats 1"
    "bench_diversity.py|--blocks 16 --naive-sample 4 --batch-size 16"
    "bench_analyze.py|--small"
    "bench_verl_import.py|--steps 2 --rows 32 --response-tokens 64"
    "bench_leaderboard_html.py|--tasks 30"
    "bench_leaderboard_tasks.py|--tasks 20"
    "bench_adaptive.py|--resamples 3 --ks 16"
    "bench_coverage.py|--draws 40 --tasks aime24"
    "grading_diff.py|. --limit 40"
    "bench_replay.py|--controllers sc@64,esc@64,asc@64,probe@64 --cert-classes exact --cert-seeds 10 --certify 50 --ties 1"
    "bench_malformed.py|--small"
    "bench_nano_power.py|--runs 20"
    "bench_ranking.py|--small"
    "bench_gain_null.py|--small"
    "bench_frozen_draws.py|--small"
)
# name|why it is skipped
GPU_ONLY=(
    "bench_vllm.py|needs CUDA and vllm (run it on a GPU machine)"
    "gpu_check.sh|GPU check: needs CUDA"
    "gpu_hf_check.py|GPU check: needs CUDA"
    "gpu_*|GPU scripts (gpu_*): need CUDA"
    "vllm_carry.py|vLLM on a GPU machine"
    "vllm_carry_deps.py|the carry list that vllm_carry.py imports (no bench)"
    "bench_malformed_cases.py|the cases that bench_malformed.py imports (no bench)"
    "bench_malformed_replay.py|round six's cases (replay, Parallel-Probe files, tag structures) that bench_malformed_cases.py imports (no bench)"
    "bench_malformed_endpoint.py|the endpoint engine's cases (a misbehaving server on 127.0.0.1) that bench_malformed_cases.py imports (no bench)"
    "check_streamlit_floor.py|needs downloaded Streamlit wheels; tests/test_dependency_floors.py pins its result"
    "smoke.sh|this script"
    "bench_nano_draws.py|the CI slice once per draw (8 min each on an idle machine); .ci/run's nano step runs the same job, and tests/repro/test_nano_draws.py its table"
    "bench_smollm2.py|SmolLM2-135M through SFT, scoring and analysis (about an hour on 2 cores); even --small (1 problem, 8 tokens, with lm-eval beside it) loads the model four times (22 s with the converted model cached, a minute more to convert it); tests/repro/test_smollm2.py is the CI smoke of the model path (load, one short generation, one report) and tests/bench/test_smollm2_table.py checks the bench's table"
    "bench_nano.py|run by .ci/run as a step of its own (--plan ci --repeat unseen-s2: the nano curriculum's CI slice, about 6 min on an idle machine)"
)

listed() {  # whether bench/$1 is named in either list (patterns allowed in GPU_ONLY)
    local entry
    for entry in "${CPU_BENCHES[@]}" "${GPU_ONLY[@]}"; do
        # shellcheck disable=SC2053
        [[ "$1" == ${entry%%|*} ]] && return 0
    done
    return 1
}

status=0
for path in bench/*; do
    name="$(basename "$path")"
    [ -f "$path" ] || continue
    if ! listed "$name"; then
        echo "bench smoke: bench/$name is in neither CPU_BENCHES nor GPU_ONLY of bench/smoke.sh; add it" >&2
        status=1
    fi
done
for entry in "${GPU_ONLY[@]}"; do
    echo "bench smoke: skip ${entry%%|*}: ${entry#*|}"
done

# A bench is stopped only when it stops making progress, never for being slow on a busy machine (at a
# load of 19 a fixed 300 s limit stopped a healthy bench_ray.py): STALL_SECONDS with neither a new line
# of output nor a second of CPU time used by its processes (a deadlock, a hang on a lock or a socket).
# A bench that spins without output is caught by the generous ceiling scaled by the load average.
STALL_SECONDS=${BENCH_STALL_SECONDS:-300}
CEILING_SECONDS=${BENCH_CEILING_SECONDS:-1800}

session_cpu() {  # CPU seconds used so far by every process of session $1
    ps -s "$1" -o cputimes= 2>/dev/null | awk '{s += $1} END {print s + 0}'
}

watch_bench() {  # wait for session $1 (log $2); stop it when stalled or past the load-scaled ceiling
    local sid="$1" log="$2" last_size=-1 last_cpu=-1 still=0 waited=0 size cpu ceiling load
    while kill -0 "$sid" 2>/dev/null; do
        sleep 1
        waited=$((waited + 1))
        size=$(stat -c %s "$log" 2>/dev/null || echo 0)
        cpu=$(session_cpu "$sid")
        if [ "$size" != "$last_size" ] || [ "$cpu" != "$last_cpu" ]; then still=0; else still=$((still + 1)); fi
        last_size=$size last_cpu=$cpu
        load=$(cut -d' ' -f1 /proc/loadavg)
        ceiling=$(awk -v c="$CEILING_SECONDS" -v l="$load" -v n="$(nproc)" 'BEGIN{f = l / n; if (f < 1) f = 1; print int(c * f)}')
        if [ "$still" -ge "$STALL_SECONDS" ] || [ "$waited" -ge "$ceiling" ]; then
            echo "bench smoke: stopping it: ${still} s without output or CPU progress, ${waited} s in all (ceiling ${ceiling} s at load ${load})" >>"$log"
            kill -TERM -- "-$sid" 2>/dev/null; sleep 5; kill -KILL -- "-$sid" 2>/dev/null
            return 124
        fi
    done
    return 0
}

run_bench() {  # run one "name|args" entry; print its line; non-zero exit when it failed
    local name="${1%%|*}" args="${1#*|}" start log code pid
    start=$(date +%s.%N)
    log="$(mktemp)"
    code=0
    # shellcheck disable=SC2086
    setsid python "bench/$name" $args >"$log" 2>&1 &
    pid=$!
    watch_bench "$pid" "$log" || code=$?
    wait "$pid" 2>/dev/null || { [ "$code" -ne 0 ] || code=$?; }
    if [ "$code" -eq 0 ]; then
        printf 'bench smoke: ok   %-22s %6.1f s\n' "$name" "$(awk "BEGIN{print $(date +%s.%N) - $start}")"
        rm -f "$log"
        return 0
    fi
    printf 'bench smoke: FAIL %-22s exit %s; its last lines:\n%s\n' "$name" "$code" "$(tail -n 20 "$log")" >&2
    rm -f "$log"
    return 1
}

run_lane() {  # run entries $@ one after another; exit status 1 if any failed
    local failed=0 entry
    for entry in "$@"; do run_bench "$entry" || failed=1; done
    return "$failed"
}

total_start=$(date +%s.%N)
run_lane "${CPU_BENCHES[@]:0:LANE1}" & lane1=$!
run_lane "${CPU_BENCHES[@]:LANE1}" & lane2=$!
wait "$lane1" || status=1
wait "$lane2" || status=1
printf 'bench smoke: %d CPU benches in %.1f s, two lanes (load average %s)\n' "${#CPU_BENCHES[@]}" \
    "$(awk "BEGIN{print $(date +%s.%N) - $total_start}")" "$(cut -d' ' -f1 /proc/loadavg)"
exit "$status"
