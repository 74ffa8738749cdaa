"""Ranking checkpoints on real trajectories: wrong verdicts, decisions per sample, and finding the best.

Why: ``pr1-eval sweep --adaptive`` (:mod:`pr1_eval.stats.ranking_sequential` on the confidence
sequences of :mod:`pr1_eval.stats.paired_sequential`) promises that the chance of any wrong verdict
across a sweep is ≤ α, and that it decides with fewer samples than fixed k. This checks both where
the truth is known: the budget testbed (:mod:`pr1_eval.replay.budget_testbed`: one checkpoint per
thinking budget of Qwen3-8B, a duplicate, two near-ties; 10 checkpoints × 30 problems per
benchmark; truth = each condition's 128-answer means). Each resample draws every condition's
samples independently with replacement from its own 128 answers (seeded; the same draws serve every
rule in a resample). Per benchmark:

* (a) **family-wise wrong**: the share of resamples with any wrong declared sign, any wrong "within
  ±δ", or a declared best more than δ below the true best, for every rule;
* (b) **correct decisions against cost** (pairs of the 45 with a correct sign or a correct
  "within ±δ"; mean samples and tokens drawn): fixed k = 4 … 64 with the fixed-n test of the same
  estimand (a z-test of the mean over problems of the per-problem difference, within-problem
  variances; TOST for "within ±δ"; Holm over all 2 × 45 hypotheses at α) — the baseline, in the same
  process on the same draws — against the adaptive rule (question "ranking") at several k_max;
  "adaptive ≥ fixed" says whether the adaptive curve, interpolated at each fixed k's cost, reaches
  its decisions;
* (c) **finding the best** (question "best"): the share of resamples declaring a best within δ of
  the true best, and its samples as a ratio of fixed k = 16's;
* the **existing paired test** (:mod:`pr1_eval.stats.paired`, problems resampled: its estimand is problems
  like these) as its own row: on the true null pair (a condition against its duplicate, k = 16) how
  often the sign-flip test (p < α) and the paired bootstrap interval declare a sign.

Usage: nice python bench/bench_ranking.py [--data DIR] [--resamples 1000] [--small]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.stats import norm

from pr1_eval.ingest.parallel_probe import read_parallel_probe
from pr1_eval.replay.budget_testbed import Condition, build_testbed, draw
from pr1_eval.stats import group_sequential as gs
from pr1_eval.stats import paired_sequential as ps
from pr1_eval.stats import ranking_sequential as rs
from pr1_eval.stats.paired import holm, paired_bootstrap_ci, sign_flip_test

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT / ".." / "shared" / "data" / "parallel-probe"
GROWTH = 2.0  # rounds' growth (--growth)
CHUNK = 50  # resamples drawn at once (memory: 50 × 45 pairs × 30 problems × 64 samples)
RULE_TAGS = {"obrien-fleming": "OBF", "pocock": "Pocock", "cs": "CS"}


@dataclass
class Tally:
    """Per rule: sums over resamples."""

    runs: int = 0
    wrong: int = 0
    correct: float = 0.0
    samples: float = 0.0
    tokens: float = 0.0
    best_found: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    def add(self, wrong: np.ndarray, correct: np.ndarray, samples: np.ndarray, tokens: np.ndarray,
            best_found: np.ndarray | None = None) -> None:
        self.runs += len(wrong)
        self.wrong += int(wrong.sum())
        self.correct += float(correct.sum())
        self.samples += float(samples.sum())
        self.tokens += float(tokens.sum())
        if best_found is not None:
            self.best_found += int(best_found.sum())

    def mean(self, name: str) -> float:
        return float(getattr(self, name)) / max(self.runs, 1)


def judge(cert: rs.Certified, means: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """(any wrong statement, correct decided pairs) per resample, against the true means."""
    gap = means[:, None] - means[None, :]
    wrong_beats = cert.beats & (gap <= 0)
    wrong_close = cert.close & (gap <= -delta)
    wrong = (wrong_beats | wrong_close).any(axis=(-1, -2))
    upper = np.triu(np.ones(gap.shape, dtype=bool), 1)
    sign_ok = (cert.beats & (gap > 0)) | (np.swapaxes(cert.beats, -1, -2) & (gap < 0))
    within_ok = cert.close & np.swapaxes(cert.close, -1, -2) & (np.abs(gap) < delta)
    correct = ((sign_ok | within_ok) & ~wrong_beats & ~np.swapaxes(wrong_beats, -1, -2) & upper).sum(axis=(-1, -2))
    return wrong, correct


def fixed_k(correct: np.ndarray, k: int, alpha: float, delta: float) -> rs.Certified:
    """The fixed-n test of Δ on the first k samples: z on the mean of per-problem differences, TOST, Holm."""
    c = correct[..., :k].astype(float)  # R × C × P × k
    count = c.shape[1]
    a, b = np.triu_indices(count, 1)
    d = c[:, a] - c[:, b]  # R × pairs × P × k
    est = d.mean(axis=(-1, -2))
    var = d.var(axis=-1, ddof=1) if k > 1 else np.full(d.shape[:-1], 0.5)
    se = np.sqrt(var.sum(axis=-1) / (d.shape[-2] ** 2 * k)) + 1e-12
    p_sign = 2 * norm.sf(np.abs(est) / se)
    p_eq = np.maximum(norm.cdf((est - delta) / se), norm.sf((est + delta) / se))
    both = np.concatenate([p_sign, p_eq], axis=1)
    adjusted = np.array([[p if p is not None else 1.0 for p in holm(list(row))] for row in both])
    reject = adjusted < alpha
    sign, equal = reject[:, : len(a)], reject[:, len(a):]
    return rs.Certified(rs.pair_matrix(sign & (est > 0), sign & (est < 0), count), rs.as_matrix(equal, count))


def adaptive(correct: np.ndarray, cost_cum: np.ndarray, k_max: int, first: int, question: str, alpha: float,
             delta: float, rule: str = "obrien-fleming",
             reserve: float = 0.0) -> tuple[rs.Certified, np.ndarray, np.ndarray, np.ndarray]:
    """Replay the sweep's rule: (certified, samples, tokens, declared best) per resample. ``rule``: ``cs`` (the
    confidence sequences) or a spending function of :mod:`pr1_eval.stats.group_sequential`."""
    resamples, count, problems, _ = correct.shape
    a, b = np.triu_indices(count, 1)
    diffs = correct[:, a, :, :k_max].astype(float) - correct[:, b, :, :k_max]  # R × pairs × P × k_max
    bounds = rs.round_bounds(first, k_max, GROWTH)
    if rule == "cs":
        ev = ps.evidence(diffs)
    else:
        zev, table = gs.z_evidence(diffs), gs.boundary_table(gs.fractions_of(bounds, k_max), rule)
    weights, kept = rs.pair_weights(count, reserve=reserve)
    held = np.zeros((resamples, count), dtype=int)
    running = rs.Running.start((resamples, len(a)))
    cert = rs.Certified.none((resamples, count, count))
    active = np.ones((resamples, count), dtype=bool)
    done = np.zeros(resamples, dtype=bool)
    pair_alpha = np.minimum(alpha * weights / (2 if question == "ranking" else 3), 0.5)
    for bound in bounds:
        held = np.where(active & ~done[:, None], bound, held)
        look = np.minimum(held[:, a], held[:, b])  # R × pairs
        if rule == "cs":
            now = ev.at(look - 1)
            running = running.update(now, delta, look > 0)
            half = ps.half_width(now, pair_alpha) if question == "ranking" else None
            estimate = now.total / np.maximum(now.pairs, 1)
        else:
            znow, row = zev.at(look - 1), np.searchsorted(bounds, look)
            running = running.fold(gs.look_p_values(znow, delta, np.where(look > 0, row, -1), table), look > 0)
            low, high = gs.interval(znow, row, table, pair_alpha / 2)
            half, estimate = (high - low) / 2, znow.estimate
        cert = rs.certify(running, weights, kept, alpha, count, question)
        means = _means(correct, held)
        wanted = None
        if question == "ranking":
            wanted = rs.as_matrix(rs.chased(estimate, np.asarray(half), look, k_max, delta), count)
        active = rs.open_checkpoints(question, cert, wanted)
        done |= rs.finished(question, cert, means, active)
    best = rs.declared_best(cert, _means(correct, held)) if question == "best" else np.full(resamples, -1)
    samples = held.sum(axis=1) * problems
    tokens = np.take_along_axis(cost_cum, held[:, :, None], axis=2)[:, :, 0].sum(axis=1)
    return cert, samples, tokens, best


def _means(correct: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Each checkpoint's mean over problems of its held samples' mean (R × C)."""
    k = correct.shape[-1]
    mask = np.arange(k)[None, None, None, :] < held[:, :, None, None]
    return (correct & mask).sum(axis=(-1, -2)) / np.maximum(held * correct.shape[2], 1)


def existing_test(correct: np.ndarray, pair: tuple[int, int], k: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """pr1_eval.stats.paired on per-problem means at k (problems resampled): (sign-flip p < α, bootstrap CI off 0)."""
    flips, boots = [], []
    for sample in correct[..., :k]:
        diffs = sample[pair[0]].mean(axis=-1) - sample[pair[1]].mean(axis=-1)
        flips.append(sign_flip_test(diffs).p_value < alpha)
        interval = paired_bootstrap_ci(diffs, n_resamples=2_000)
        boots.append(interval is not None and (interval[0] > 0 or interval[1] < 0))
    return np.array(flips), np.array(boots)


@dataclass
class Plan:
    fixed: list[int]
    k_maxes: list[int]
    first: int
    alpha: float
    delta: float
    resamples: int
    rules: tuple[str, ...] = ("obrien-fleming",)
    reserve: float = 0.0


def measure(conditions: list[Condition], plan: Plan, seed: int) -> dict[str, Tally]:
    """Every rule on the same draws, ``plan.resamples`` of them, in chunks."""
    means = np.array([c.truth.mean() for c in conditions])
    top = max(plan.k_maxes + plan.fixed)
    null = next(i for i, c in enumerate(conditions) if c.name.endswith("(again)"))
    twin = next(i for i, c in enumerate(conditions) if c.name == conditions[null].name.replace(" (again)", ""))
    tallies: dict[str, Tally] = {}
    rng = np.random.default_rng(seed)
    began = time.perf_counter()
    for start in range(0, plan.resamples, CHUNK):
        if start:
            print(f"  {start} of {plan.resamples} resamples, {time.perf_counter() - began:.0f} s", file=sys.stderr,
                  flush=True)
        size = min(CHUNK, plan.resamples - start)
        correct, cost = draw(conditions, top, rng, size)
        cost_cum = np.concatenate([np.zeros(cost.shape[:2] + (1,)), np.cumsum(cost.sum(axis=2), axis=-1)], axis=-1)
        problems = correct.shape[2]
        for k in plan.fixed:
            cert = fixed_k(correct, k, plan.alpha, plan.delta)
            wrong, good = judge(cert, means, plan.delta)
            est = correct[..., :k].mean(axis=(-1, -2))
            found = (means.max() - means[est.argmax(axis=1)]) < plan.delta
            tallies.setdefault(f"fixed k={k}", Tally()).add(wrong, good, np.full(size, len(conditions) * problems * k),
                                                           cost_cum[:, :, k].sum(axis=1), found)
        for rule in plan.rules:
            for question in ("ranking", "best"):
                for k_max in plan.k_maxes:
                    cert, samples, tokens, best = adaptive(correct, cost_cum, k_max, plan.first, question, plan.alpha,
                                                           plan.delta, rule, plan.reserve)
                    wrong, good = judge(cert, means, plan.delta)
                    found = (best >= 0) & ((means.max() - means[np.maximum(best, 0)]) < plan.delta)
                    wrong_best = (best >= 0) & ~found
                    tallies.setdefault(f"adaptive {question} k_max={k_max} [{RULE_TAGS[rule]}]", Tally()).add(
                        wrong | wrong_best, good, samples, tokens, found)
        flips, boots = existing_test(correct, (twin, null), 16, plan.alpha)
        tally = tallies.setdefault("existing paired test, null pair, k=16", Tally())
        tally.runs += size
        tally.extra["sign_flip"] = tally.extra.get("sign_flip", 0.0) + float(flips.sum())
        tally.extra["bootstrap"] = tally.extra.get("bootstrap", 0.0) + float(boots.sum())
    return tallies


def above_fixed(tallies: dict[str, Tally], plan: Plan, unit: str, rule: str) -> list[str]:
    """Fixed-k points the adaptive ranking curve of ``rule`` (piecewise linear in cost) does not reach."""
    points = sorted((t.mean(unit), t.mean("correct")) for n, t in tallies.items()
                    if n.startswith("adaptive ranking") and n.endswith(f"[{RULE_TAGS[rule]}]"))
    xs, ys = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    misses = []
    for k in plan.fixed:
        t = tallies[f"fixed k={k}"]
        cost, good = t.mean(unit), t.mean("correct")
        reach = np.interp(cost, xs, ys) if cost >= xs[0] else (ys[0] if good <= ys[0] else -1.0)
        if reach + 1e-9 < good:
            misses.append(f"k={k} ({good:.2f} vs {reach:.2f})")
    return misses


def report(task: str, conditions: list[Condition], tallies: dict[str, Tally], plan: Plan) -> dict[str, float]:
    """Print one benchmark's table; return its headline figures."""
    means = [c.truth.mean() for c in conditions]
    print(f"\n{task}: " + ", ".join(f"{c.name} {100 * m:.2f}" for c, m in zip(conditions, means, strict=True)))
    reference = tallies["fixed k=16"].mean("samples") if "fixed k=16" in tallies else 1.0
    print(f"{'rule':34} {'fam. wrong':>10} {'correct pairs':>13} {'samples':>8} {'tokens (M)':>10} "
          f"{'best within δ':>13} {'samples / k=16':>14}")
    for name, t in tallies.items():
        if name.startswith("existing"):
            continue
        print(f"{name:34} {t.mean('wrong'):>10.1%} {t.mean('correct'):>13.2f} {t.mean('samples'):>8.0f} "
              f"{t.mean('tokens') / 1e6:>10.2f} {t.mean('best_found'):>13.1%} {t.mean('samples') / reference:>14.2f}")
    ex = tallies["existing paired test, null pair, k=16"]
    print(f"{'existing paired test (problems resampled), null pair, k=16':60} sign-flip p<α declares a sign "
          f"{ex.extra['sign_flip'] / ex.runs:.1%}, bootstrap interval {ex.extra['bootstrap'] / ex.runs:.1%}")
    misses = {(rule, unit): above_fixed(tallies, plan, unit, rule) for rule in plan.rules
              for unit in ("samples", "tokens")}
    for (rule, unit), miss in misses.items():
        print(f"adaptive ranking curve [{RULE_TAGS[rule]}] at or above fixed k in {unit}: "
              + ("yes, at every fixed k" if not miss else "NO at " + ", ".join(miss)))
    best = [(t.mean("samples") / reference, t.mean("best_found")) for n, t in tallies.items()
            if n.startswith("adaptive best") and n.endswith(f"[{RULE_TAGS[plan.rules[0]]}]")]
    reached = [ratio for ratio, found in best if found >= 1 - plan.alpha]
    print("best within δ with probability ≥ 1 − α: " + (f"at {min(reached):.2f} × fixed k=16's samples"
                                                       if reached else "not reached at these k_max"))
    return {"wrong": max(t.mean("wrong") for n, t in tallies.items() if not n.startswith("existing")),
            "ratio": min(reached) if reached else float("nan"), "curve_misses": float(sum(map(len, misses.values())))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    env = os.environ.get("PARALLEL_PROBE_DATA")
    ap.add_argument("--data", type=Path, default=Path(env) if env else DEFAULT_DATA,
                    help="folder of Parallel-Probe *.json trajectories (default: $PARALLEL_PROBE_DATA, else "
                         "../shared/data/parallel-probe beside the repository)")
    ap.add_argument("--require", action="store_true", default=bool(env),
                    help="fail (exit 1) when the data folder is missing (default when $PARALLEL_PROBE_DATA is set)")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--fixed", default="4,8,16,32,64", help="fixed k of the baseline")
    ap.add_argument("--k-max", default="8,16,32,64", help="k_max of the adaptive rule")
    ap.add_argument("--first", type=int, default=4, help="samples per problem in the adaptive rule's first round "
                    "(then doubling)")
    ap.add_argument("--growth", type=float, default=2.0, help="each round's samples per problem × this")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--delta", type=float, default=0.1, help="resolution δ (a fraction: 0.1 = 10 points)")
    ap.add_argument("--tasks", default=None, help="only these benchmarks (comma-separated)")
    ap.add_argument("--rules", default="obrien-fleming",
                    help="the adaptive rules measured, comma-separated: obrien-fleming, pocock (α spent over looks "
                         "up to k_max) and cs (confidence sequences); the first is the goals' (default obrien-fleming)")
    ap.add_argument("--reserve", type=float, default=0.0,
                    help="share of α the adaptive rule keeps for checkpoints arriving later (the sweep's --reserve; "
                         "default 0 here: the testbed's ten checkpoints are all known, as fixed k needs them to be)")
    ap.add_argument("--small", action="store_true", help="CI size: 50 resamples, one benchmark, k up to 16")
    args = ap.parse_args(argv)
    if not args.data.is_dir() or not list(args.data.glob("*.json")):
        if args.require:
            print(f"error: no Parallel-Probe trajectories in {args.data} (--require; pass --data DIR)", file=sys.stderr)
            return 1
        print(f"skipped: no Parallel-Probe trajectories in {args.data} (pass --data DIR)")
        return 0
    rules = tuple(args.rules.split(","))
    unknown = [r for r in rules if r not in RULE_TAGS]
    if unknown:
        print(f"error: unknown rule(s) {', '.join(unknown)}; choose from {', '.join(RULE_TAGS)}", file=sys.stderr)
        return 2
    plan = Plan([int(k) for k in args.fixed.split(",")], [int(k) for k in args.k_max.split(",")], args.first,
                args.alpha, args.delta, args.resamples, rules, args.reserve)
    tasks = args.tasks.split(",") if args.tasks else None
    global GROWTH
    GROWTH = args.growth
    if args.small:
        plan = Plan([4, 16], [8, 16], args.first, args.alpha, args.delta, 50, rules, args.reserve)
        tasks = tasks or ["aime24"]
    started = time.perf_counter()
    print(f"ranking on the budget testbed ({args.data}); {plan.resamples} resamples per cell, alpha {plan.alpha}, "
          f"delta {plan.delta}; adaptive rounds {plan.first}, then × {GROWTH:g} up to k_max")
    summary = []
    for path in sorted(args.data.glob("*.json")):
        probe = read_parallel_probe(path)
        if tasks and probe.task not in tasks:
            continue
        conditions = build_testbed(probe.questions)
        summary.append((probe.task, report(probe.task, conditions, measure(conditions, plan, seed=0), plan)))
    print("\nsummary:")
    for task, s in summary:
        print(f"  {task}: worst family-wise wrong {s['wrong']:.1%} (goal ≤ {plan.alpha:.0%}); best found at "
              f"{s['ratio']:.2f} × fixed k=16's samples (goal ≤ 0.50); curve points missed {int(s['curve_misses'])}")
    print(f"{time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
