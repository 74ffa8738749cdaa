"""Adaptive evaluation on real trajectories: tokens saved against fixed k, and whether the decisions hold.

Why: an adaptive run (``pr1-eval run --adaptive``, :mod:`pr1_eval.stats.sequential`) stops drawing a
problem once its chance of being solved is settled on one side of the margin; that is only worth
having if it saves many tokens *and* a researcher reaches the same conclusions as with fixed k. This
replays the rule on the released Qwen3-8B trajectories (30 questions × 128 branches per benchmark,
each branch's final answer and token count; read from ``--data``, never copied) against the
baseline, fixed k, in the same process on the same draws:

* **a resample** shuffles every question's 128 branches with one seed; fixed k takes the first k,
  the adaptive rule takes the first ``n_i`` (round boundaries of ``--round-size``), so both see the
  same branches and differ only by stopping.
* **tokens**: the sum of the drawn branches' ``tokens``; the saving is 1 − adaptive / fixed.
* **decisions** that must not change: (1) each problem's side of 1/2 (solved more often than not),
  fixed k's c/k against the adaptive run's settled side, or its c/n when not settled; (2) the
  comparison with a second checkpoint: the paired 95 % bootstrap interval of the per-problem
  difference (:func:`pr1_eval.stats.paired.paired_bootstrap_ci`, the leaderboard's) above 0, below 0, or
  across it. The second checkpoint is simulated from the same branches: each question's 128 branches
  are redrawn with replacement, a correct one weighted by e^θ (``--effects``: θ = 0 is the same model
  again, θ > 0 a better one: p' = p e^θ / (p e^θ + 1 − p)); it is scored fixed or adaptive like the first.
  The table gives, per θ, the share of resamples whose verdict is the same both ways (``same``), the
  same share for fixed k against fixed k on fresh branch orders of both checkpoints (``fixed²``: how
  reproducible the verdict is in the first place, the floor any agreement figure sits on) and how
  often fixed k finds the simulated checkpoint B better (``B>A``: the power the verdict has).
* **bias**: the mean over resamples of adaptive Mean@k − fixed Mean@k (the stopped estimate's shift:
  it stops on runs of agreeing samples, so leans towards 0 and 1), with its standard error.

Usage: python bench/bench_adaptive.py [--data DIR] [--resamples 200] [--ks 16,64] [--require]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pr1_eval.ingest.parallel_probe import read_parallel_probe
from pr1_eval.stats.paired import paired_bootstrap_ci
from pr1_eval.stats.sequential import StopRule, settled, stopping_points

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT / ".." / "shared" / "data" / "parallel-probe"


@dataclass
class Benchmark:
    name: str
    correct: np.ndarray  # questions × branches, bool
    tokens: np.ndarray  # questions × branches, int


def load(data: Path) -> list[Benchmark]:
    out = []
    for path in sorted(data.glob("*.json")):
        probe = read_parallel_probe(path)
        out.append(Benchmark(probe.task, np.array([[b.final_answer == q.gold for b in q.branches] for q in probe.questions]),
                             np.array([[b.tokens for b in q.branches] for q in probe.questions])))
    return out


def shuffled(rng: np.random.Generator, *arrays: np.ndarray) -> list[np.ndarray]:
    """Every question's branches in a new order (the same order for each array)."""
    order = np.argsort(rng.random(arrays[0].shape), axis=1)
    return [np.take_along_axis(a, order, axis=1) for a in arrays]


def tilted(rng: np.random.Generator, correct: np.ndarray, tokens: np.ndarray, theta: float) -> list[np.ndarray]:
    """A second checkpoint: each question's branches redrawn with replacement, correct ones weighted e^θ."""
    weights = np.where(correct, np.exp(theta), 1.0)
    cumulative = np.cumsum(weights / weights.sum(axis=1, keepdims=True), axis=1)
    draws = (rng.random(correct.shape)[:, :, None] > cumulative[:, None, :]).sum(axis=2)
    draws = np.minimum(draws, correct.shape[1] - 1)
    return [np.take_along_axis(correct, draws, axis=1), np.take_along_axis(tokens, draws, axis=1)]


@dataclass
class Scored:
    mean: np.ndarray  # per problem: c/n
    n: np.ndarray
    tokens: int
    side: np.ndarray  # per problem: +1 solved more often than not, -1 less, 0 a tie


def score(correct: np.ndarray, tokens: np.ndarray, rule: StopRule, adaptive: bool) -> Scored:
    k = rule.max_k
    n = stopping_points(correct, rule) if adaptive else np.full(len(correct), k)
    drawn = np.arange(correct.shape[1])[None, :] < n[:, None]
    c = (correct & drawn).sum(axis=1)
    side = np.sign(c / n - 0.5).astype(int)
    if adaptive:
        side = np.where(settled(c, n, rule) != 0, settled(c, n, rule), side)
    return Scored(c / n, n, int((tokens * drawn).sum()), side)


def verdict(a: Scored, b: Scored) -> int:
    """+1: a better (the paired interval above 0), -1: worse, 0: not told apart (2,000 bootstrap
    resamples, not the leaderboard's 10,000: the bench draws thousands of intervals)."""
    interval = paired_bootstrap_ci(a.mean - b.mean, n_resamples=2_000)
    if interval is None:
        return 0
    return 1 if interval[0] > 0 else -1 if interval[1] < 0 else 0


def measure(bench: Benchmark, rule: StopRule, resamples: int, effects: list[float]) -> dict[str, float]:
    saved_tokens, saved_samples, bias, sides_same = [], [], [], []
    verdicts_same: dict[float, list[bool]] = {e: [] for e in effects}
    verdicts_fixed: dict[float, list[int]] = {e: [] for e in effects}
    verdicts_again: dict[float, list[bool]] = {e: [] for e in effects}
    for seed in range(resamples):
        rng = np.random.default_rng(seed)
        correct, tokens = shuffled(rng, bench.correct, bench.tokens)
        fixed, adaptive = score(correct, tokens, rule, False), score(correct, tokens, rule, True)
        saved_tokens.append(1 - adaptive.tokens / fixed.tokens)
        saved_samples.append(1 - adaptive.n.sum() / fixed.n.sum())
        bias.append(adaptive.mean.mean() - fixed.mean.mean())
        sides_same.append(bool((adaptive.side == fixed.side).all()))
        for effect in effects:
            other_c, other_t = tilted(rng, bench.correct, bench.tokens, effect)
            other_c, other_t = shuffled(rng, other_c, other_t)
            v_fixed = verdict(score(other_c, other_t, rule, False), fixed)
            v_adaptive = verdict(score(other_c, other_t, rule, True), adaptive)
            verdicts_same[effect].append(v_fixed == v_adaptive)
            verdicts_fixed[effect].append(v_fixed)
            again = shuffled(rng, correct, tokens) + shuffled(rng, other_c, other_t)  # fixed k on fresh orders
            v_again = verdict(score(again[2], again[3], rule, False), score(again[0], again[1], rule, False))
            verdicts_again[effect].append(v_fixed == v_again)
    out = {"tokens_saved": float(np.mean(saved_tokens)), "samples_saved": float(np.mean(saved_samples)),
           "bias": float(np.mean(bias)), "bias_se": float(np.std(bias, ddof=1) / np.sqrt(len(bias))) if len(bias) > 1 else 0.0,
           "max_shift": float(np.max(np.abs(bias))), "sides_same": float(np.mean(sides_same)),
           "truth": float(bench.correct.mean())}
    for effect in effects:
        out[f"same_{effect:g}"] = float(np.mean(verdicts_same[effect]))
        out[f"better_{effect:g}"] = float(np.mean(np.array(verdicts_fixed[effect]) == 1))
        out[f"again_{effect:g}"] = float(np.mean(verdicts_again[effect]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    env = os.environ.get("PARALLEL_PROBE_DATA")  # set by .ci/run, as for bench_replay.py
    ap.add_argument("--data", type=Path, default=Path(env) if env else DEFAULT_DATA,
                    help="folder of Parallel-Probe *.json trajectories (default: $PARALLEL_PROBE_DATA, else "
                         "../shared/data/parallel-probe beside the repository)")
    ap.add_argument("--require", action="store_true", default=bool(env),
                    help="fail (exit 1) when the data folder is missing (default when $PARALLEL_PROBE_DATA is set)")
    ap.add_argument("--resamples", type=int, default=200, help="branch orders (seeds 0..N-1)")
    ap.add_argument("--ks", default="16,64", help="fixed k to compare against")
    ap.add_argument("--round-size", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--margin", type=float, default=0.5)
    ap.add_argument("--effects", default="0,0.5,1", help="θ of the simulated second checkpoints")
    args = ap.parse_args(argv)
    if not args.data.is_dir() or not list(args.data.glob("*.json")):
        if args.require:
            print(f"error: no Parallel-Probe trajectories in {args.data} (--require; pass --data DIR)", file=sys.stderr)
            return 1
        print(f"skipped: no Parallel-Probe trajectories in {args.data} (pass --data DIR)")
        return 0
    started = time.perf_counter()
    benches = load(args.data)
    effects = [float(e) for e in args.effects.split(",")]
    print(f"adaptive vs fixed k on {', '.join(b.name for b in benches)} ({args.data}); {args.resamples} branch orders; "
          f"rounds of {args.round_size}, alpha {args.alpha}, margin {args.margin}")
    header = (f"{'task':8} {'k':>3} {'tokens saved':>12} {'samples saved':>13} {'sides same':>10} "
              + " ".join(f"{'same θ=' + format(e, 'g'):>9} {'fixed²':>6} {'B>A θ=' + format(e, 'g'):>9}" for e in effects)
              + f" {'bias (pp)':>14} {'max |shift|':>11}")
    print(header)
    worst = {"tokens": 1.0, "same": 1.0}
    for k in (int(x) for x in args.ks.split(",")):
        rule = StopRule(max_k=k, round_size=args.round_size, alpha=args.alpha, margin=args.margin).check()
        for bench in benches:
            m = measure(bench, rule, args.resamples, effects)
            worst["tokens"] = min(worst["tokens"], m["tokens_saved"])
            worst["same"] = min([worst["same"], m["sides_same"], *(m[f"same_{e:g}"] for e in effects)])
            print(f"{bench.name:8} {k:>3} {m['tokens_saved']:>11.1%} {m['samples_saved']:>13.1%} {m['sides_same']:>10.1%} "
                  + " ".join(f"{m[f'same_{e:g}']:>9.1%} {m[f'again_{e:g}']:>6.0%} {m[f'better_{e:g}']:>9.1%}"
                             for e in effects)
                  + f" {100 * m['bias']:>+7.2f} ± {100 * m['bias_se']:.2f} {100 * m['max_shift']:>10.2f}")
    print(f"baseline: fixed k on the same branch orders; least tokens saved {worst['tokens']:.1%} (goal ≥ 30 %), "
          f"least decision agreement {worst['same']:.1%} (goal ≥ 95 %); {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
