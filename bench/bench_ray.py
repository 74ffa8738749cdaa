"""Ray scale-out bench: 1 vs 2 replicas on this machine, and the queue against a static split.

Why: ``--ray`` must turn replicas into throughput (two CPU replicas of one thread each should
come close to twice one replica on a machine with two free cores), and its work queue must keep
replicas busy when generation times are long-tailed, as reasoning lengths are, where a split of
the problems fixed in advance (what ``--shard i/n`` does) leaves most replicas idle while a few
finish the long problems.

1. throughput — the trained tiny model on the HF engine, one problem per chunk: per-problem
   generation times measured in this process (one thread: the baseline, and the times replayed
   below), then the same problems through a local Ray cluster with 1 and with 2 replicas of one
   thread each. Reported: tokens/s of each, and the 2-vs-1 replica ratio.
2. scheduling — per-problem times replayed over 8, 64 and 512 simulated replicas: the queue with
   the pool's guided chunks (big first, single problems at the end), with fixed chunks of about
   four per replica, with one problem per chunk, and a static round-robin split (``--shard``);
   reported: idle share (share of replica time paid for and unused) and the static split's
   makespan over the guided queue's. A chunk takes the sum of its problems' times. Profiles: the measured times resampled; a lognormal fitted to them; and a
   reasoning-like lognormal (σ = 1, capped at 8× the median, as a 3000-token budget caps long
   answers), since the tiny model's responses are far less long-tailed than a real checkpoint's.

    python bench/bench_ray.py                      # ~1-3 min on 2 cores
    python bench/bench_ray.py --problems 32 -k 4 --max-new-tokens 96 --json out.json

The cluster is local, on 127.0.0.1, and shut down at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SIM_PROBLEMS = 600  # one checkpoint: AIME24 30 + AIME25 30 + AMC23 40 + MATH-500 500


def prompts(model: str, n: int) -> tuple[list[list[int]], list[str]]:
    """Rendered prompt ids and request ids of the first ``n`` GSM8K test problems."""
    from pr1_eval.engines.hf import load_tokenizer
    from pr1_eval.inputs.prompts import apply_chat, load_template
    from pr1_eval.inputs.tasks import load_task

    tokenizer = load_tokenizer(model)
    task = load_task("gsm8k", limit=n, source="packaged")
    template = load_template("parallel_r1_v3")
    ids = [list(tokenizer(apply_chat(tokenizer, template.render(p.problem)), add_special_tokens=False)["input_ids"])
           for p in task.problems]
    return ids, [f"gsm8k/{p.problem_id}" for p in task.problems]


def in_process(model: str, contexts: list[list[int]], rids: list[str], k: int, sampling: Any) -> dict[str, Any]:
    """One engine here, one thread, one problem at a time: per-problem times and tokens/s."""
    import torch

    from pr1_eval.decoding.base import SequentialDecoder
    from pr1_eval.engines.hf import HFEngine

    torch.set_num_threads(1)
    engine, decoder = HFEngine(model), SequentialDecoder()
    decoder.decode(engine, contexts[:1], k, sampling, rids[:1])  # warm-up
    times, tokens = [], 0
    for ctx, rid in zip(contexts, rids, strict=True):
        start = time.perf_counter()
        out = decoder.decode(engine, [ctx], k, sampling, [rid])
        times.append(time.perf_counter() - start)
        tokens += sum(len(s.token_ids) for s in out[0])
    return {"times": times, "tokens": tokens, "seconds": sum(times), "tokens_per_s": tokens / sum(times)}


def ray_pools(model: str, counts: Sequence[int], contexts: list[list[int]], rids: list[str], k: int, sampling: Any,
              repeats: int) -> list[dict[str, Any]]:
    """The same problems (one chunk per problem) through pools of ``counts`` replicas, all loaded
    and warmed up first, then timed alternately ``repeats`` times; the best run of each is kept
    (other processes share this machine's cores, so a single run says more about them than us)."""
    from pr1_eval.scaleout.queue import plan_chunks
    from pr1_eval.scaleout.ray_pool import RayPool, ReplicaSpec

    def payload(chunk: Any) -> tuple[list[list[int]], list[str]]:
        return [contexts[i] for i, _ in chunk.items], [rids[i] for i, _ in chunk.items]

    spec = ReplicaSpec(model, "hf", {}, threads=1)
    pools = [RayPool.start(spec, "auto", n, 0) for n in counts]
    try:
        for pool, n in zip(pools, counts, strict=True):
            pool.wait_ready(n)  # every replica loaded before the clock starts
            list(pool.results(plan_chunks({"w": [(i, list(range(k))) for i in range(n)]}, 1), payload, k, sampling))
        chunks = plan_chunks({"gsm8k": [(i, list(range(k))) for i in range(len(contexts))]}, 1)
        best: list[dict[str, Any]] = [{} for _ in counts]
        for _ in range(repeats):
            for slot, (pool, n) in enumerate(zip(pools, counts, strict=True)):
                cpu_before, start = _cpu_seconds(pool), time.perf_counter()
                tokens = sum(len(s.token_ids) for _, out in pool.results(chunks, payload, k, sampling) for s in out[0])
                seconds, cpu = time.perf_counter() - start, _cpu_seconds(pool) - cpu_before
                run = {"replicas": n, "tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds,
                       "replica_cpu_seconds": cpu, "tokens_per_cpu_s": tokens / cpu if cpu > 0 else math.nan}
                if not best[slot] or run["tokens_per_s"] > best[slot]["tokens_per_s"]:
                    best[slot] = run
    finally:
        for pool in pools:
            pool.close()
    return best


def _cpu_seconds(pool: Any) -> float:
    """CPU time the replica processes have used (they run on this machine): on cores shared with
    other work, tokens per replica CPU-second shows whether replicas lose efficiency, which wall
    time cannot."""
    import psutil

    total = 0.0
    for info in pool.infos.values():
        times = psutil.Process(info["pid"]).cpu_times()
        total += times.user + times.system
    return total


def profiles(measured: Sequence[float], n: int, seed: int) -> dict[str, list[float]]:
    """Per-problem times for the simulation (see the module docstring)."""
    rng = random.Random(seed)
    logs = [math.log(t) for t in measured]
    mu, sigma = statistics.fmean(logs), statistics.pstdev(logs)
    median = math.exp(mu)
    return {
        "measured (resampled)": [rng.choice(list(measured)) for _ in range(n)],
        f"lognormal fit (σ={sigma:.2f})": [rng.lognormvariate(mu, sigma) for _ in range(n)],
        "reasoning-like (σ=1.0, cap 8× median)": [min(rng.lognormvariate(mu, 1.0), 8 * median) for _ in range(n)],
    }


def simulate(times: list[float], replica_counts: Sequence[int], cap: int = 64) -> list[dict[str, Any]]:
    """The pool's guided chunks (capped at vLLM's 64 problems), fixed chunks of about four per
    replica, one problem per chunk, and the static round-robin split, for each replica count."""
    from pr1_eval.scaleout.queue import guided_sizes, simulate_queue, simulate_static

    rows = []
    for replicas in replica_counts:
        sizes = guided_sizes(len(times), replicas, cap)
        fixed = max(1, min(cap, math.ceil(len(times) / (4 * replicas))))
        guided, by_fixed, single, static = (simulate_queue(times, replicas, sizes), simulate_queue(times, replicas, fixed),
                                            simulate_queue(times, replicas, 1), simulate_static(times, replicas))
        rows.append({"replicas": replicas, "guided_chunks": len(sizes), "guided_idle": guided.idle_share,
                     "fixed_chunk": fixed, "fixed_idle": by_fixed.idle_share, "single_idle": single.idle_share,
                     "static_idle": static.idle_share, "static_over_guided": static.makespan / guided.makespan})
    return rows


def print_simulation(sims: dict[str, list[dict[str, Any]]], n_problems: int) -> None:
    print(f"\nscheduling, {n_problems} problems; idle share = replica time paid for and unused")
    print(f"{'profile':38} {'replicas':>8} {'queue, guided':>19} {'queue, fixed':>16} {'queue, 1/chunk':>14} "
          f"{'static split':>12} {'static/guided time':>18}")
    for name, rows in sims.items():
        for row in rows:
            guided = f"{100 * row['guided_idle']:.1f}% ({row['guided_chunks']} ch)"
            fixed = f"{100 * row['fixed_idle']:.1f}% (×{row['fixed_chunk']})"
            print(f"{name:38} {row['replicas']:>8} {guided:>19} {fixed:>16} {100 * row['single_idle']:>13.1f}% "
                  f"{100 * row['static_idle']:>11.1f}% {row['static_over_guided']:>17.2f}x")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=24)
    parser.add_argument("-k", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--sim-problems", type=int, default=SIM_PROBLEMS)
    parser.add_argument("--replicas", default="8,64,512", help="simulated replica counts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per pool, alternating; the best is kept")
    parser.add_argument("--json", default=None)
    parser.add_argument("--times-from", default=None, metavar="JSON",
                        help="skip the measurement: replay the per-problem times of an earlier --json output")
    args = parser.parse_args(argv)
    counts = [int(x) for x in args.replicas.split(",")]
    if args.times_from:
        measured = json.loads(Path(args.times_from).read_text())["in_process"]["times"]
        print_simulation({name: simulate(times, counts) for name, times in profiles(measured, args.sim_problems,
                                                                                   args.seed).items()}, args.sim_problems)
        return 0

    from pr1_eval.engines.base import SamplingConfig
    from pr1_eval.scaleout.ray_pool import start_local_cluster
    from pr1_eval.testing.tiny_model import cached_tiny_model

    load_before = os.getloadavg()[0]
    model = str(cached_tiny_model("trained"))
    contexts, rids = prompts(model, args.problems)
    sampling = SamplingConfig(max_new_tokens=args.max_new_tokens, seed=args.seed)
    here = in_process(model, contexts, rids, args.k, sampling)
    import ray

    start_local_cluster(num_cpus=3)  # room for both pools at once; only the one being timed works
    try:
        one, two = ray_pools(model, (1, 2), contexts, rids, args.k, sampling, args.repeats)
    finally:
        ray.shutdown()
    sims = {name: simulate(times, counts) for name, times in profiles(here["times"], args.sim_problems, args.seed).items()}
    print(f"model=tiny-trained problems={args.problems} k={args.k} max_new_tokens={args.max_new_tokens} (HF, 1 thread each); "
          f"{os.cpu_count()} cores, load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after "
          "(other processes share the cores: the 2-replica ratio is only meaningful on an idle machine)")
    print(f"in this process   : {here['tokens_per_s']:8.1f} tok/s ({here['tokens']} tokens, {here['seconds']:.1f} s)")
    for r in (one, two):
        print(f"ray, {r['replicas']} replica(s) : {r['tokens_per_s']:8.1f} tok/s ({r['tokens']} tokens, {r['seconds']:.1f} s; "
              f"{r['tokens_per_cpu_s']:.1f} tokens per replica CPU-second)")
    print(f"2 replicas / 1 replica throughput: {two['tokens_per_s'] / one['tokens_per_s']:.2f}x wall, "
          f"{two['tokens_per_cpu_s'] / one['tokens_per_cpu_s']:.2f}x per replica CPU-second;  "
          f"1 replica / in-process: {one['tokens_per_s'] / here['tokens_per_s']:.2f}x")
    times = here["times"]
    print(f"measured per-problem times: median {statistics.median(times):.3f} s, p90 "
          f"{sorted(times)[int(0.9 * (len(times) - 1))]:.3f} s, max {max(times):.3f} s")
    print_simulation(sims, args.sim_problems)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "in_process": here, "ray": [one, two],
                                               "simulation": sims}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
