"""Do the intervals pr1-eval prints keep their word on real data? Coverage on the Parallel-Probe trajectories.

Why: an interval at nominal 95 % is only worth printing if it covers what it claims to in about 95 %
of repetitions, on data shaped like the real thing (problems near 0 and 1, heavy ties in maj@K,
paired differences that are mostly zero), not only on the simulations the unit tests use. This
replays evaluations from the released Qwen3-8B trajectories (3 benchmarks × 30 questions × 128
branches; read from ``--data``, never copied) and counts how often each printed interval holds its
estimand's truth.

**Two estimands, two ways of drawing** (each interval states one, :mod:`pr1_eval.stats.metrics`):

* *these problems* — the benchmark's own problems, only the samples are random. A draw takes k of
  each problem's 128 answers with replacement, per benchmark; truth = the value each metric has
  under that sampling, from all 128 answers: mean p_i, pass@K 1 − (1 − p_i)^K, maj@K the chance
  that a vote of K draws is right (exact, by counting, on the answer classes × 1,000).
* *problems like them* — problems are random too. A draw takes 30 problems with replacement from
  the 90 pooled, then k answers of each; truth = the mean of the per-problem truths over the 90.

Per cell (metric × interval × estimand) the table gives the coverage (share of draws whose interval
holds the truth; its Monte Carlo SE is about 0.7 pp at 1,000 draws), the coverage of the *other*
estimand beside it, and the width relative to an interval that knows the true variance:
2 · 1.96 · SD(point estimate over the same draws). Intervals: ``bootstrap`` = the report's interval
(:func:`pr1_eval.stats.metrics.bootstrap_ci`; estimand: problems like them); ``sampling`` = the
report's interval for these problems (:func:`pr1_eval.stats.variance.sampling_interval`); for the
paired difference the same two (:func:`pr1_eval.stats.paired.paired_bootstrap_ci`,
:func:`pr1_eval.stats.paired.paired_sampling_interval`); with ``--plain`` also ``plain``, the plain percentile
bootstrap (2.5 % tails) the report printed before, on the same resamples. Pairs: ``budget`` = the branches' answers at an
8,000-token budget (the last probe at or below it) against their final answers, each condition drawn
independently from its own 128 answers; ``null`` = final answers against final answers drawn afresh
(true difference exactly 0), where the table also gives how often the sign-flip test (p < 0.05) and
each interval (0 outside it) declare a sign.

Answers are matched as strings (the authors' scoring; the grader's equivalence classes move
HMMT25's truth, not an interval's coverage). Usage:
python bench/bench_coverage.py [--data DIR] [--draws 1000] [--k 16] [--at 4] [--require]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pr1_eval.ingest.parallel_probe import NO_ANSWER, read_parallel_probe  # noqa: E402
from pr1_eval.stats.at_k import maj_at_k  # noqa: E402
from pr1_eval.stats.metrics import (  # noqa: E402
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    bootstrap_ci,
    majority_correct,
    pass_at_k,
)
from pr1_eval.stats.paired import paired_bootstrap_ci, paired_sampling_interval, sign_flip_test  # noqa: E402
from pr1_eval.stats.resampling import resampled_means  # noqa: E402
from pr1_eval.stats.variance import sampling_interval  # noqa: E402

DEFAULT_DATA = ROOT / ".." / "shared" / "data" / "parallel-probe"
Z = 1.959963984540054
#: The budget of the non-null pair's second condition (tokens).
BUDGET = 8000
#: Answer classes are scaled by this to make maj@K's truth (K draws with replacement) a count of subsets.
IID_SCALE = 1000


@dataclass
class Condition:
    """One condition's 128 answers per problem: answer class ids (−1 = no answer) and correctness."""

    classes: np.ndarray  # problems × 128, int
    correct: np.ndarray  # problems × 128, bool


def load(data: Path) -> dict[str, tuple[Condition, Condition]]:
    """Per benchmark: (final answers, answers at :data:`BUDGET` tokens)."""
    out = {}
    for path in sorted(data.glob("*.json")):
        probe = read_parallel_probe(path)
        finals, budgeted = [], []
        for q in probe.questions:
            finals.append([b.final_answer for b in q.branches])
            at = BUDGET // q.probe_interval - 1
            budgeted.append([b.final_answer if b.tokens <= BUDGET else
                             (b.probe_answers[min(at, len(b.probe_answers) - 1)] if at >= 0 and b.probe_answers
                              else NO_ANSWER) for b in q.branches])
        golds = [q.gold for q in probe.questions]
        out[probe.task] = (_condition(finals, golds), _condition(budgeted, golds))
    return out


def _condition(answers: list[list[str]], golds: list[str]) -> Condition:
    names = {a: i for i, a in enumerate(sorted({a for row in answers for a in row}))}
    classes = np.array([[-1 if a in (NO_ANSWER, "") else names[a] for a in row] for row in answers])
    correct = np.array([[a == g for a in row] for row, g in zip(answers, golds, strict=True)])
    return Condition(classes, correct)


def _sizes(classes: np.ndarray, correct: np.ndarray) -> tuple[list[int], list[int], int]:
    held = classes >= 0
    names, inverse, sizes = np.unique(classes[held], return_inverse=True, return_counts=True)
    right = np.bincount(inverse, weights=correct[held].astype(float), minlength=names.size) > 0
    return sizes[right].tolist(), sizes[~right].tolist(), int((~held).sum())


def truths(cond: Condition, k: int, at: int) -> dict[str, np.ndarray]:
    """Per problem, each metric's value under k draws with replacement from its 128 answers."""
    p = cond.correct.mean(axis=1)
    out = {"mean": p, f"pass@{k}": 1 - (1 - p) ** k, f"pass@{at}": 1 - (1 - p) ** at}
    for kk in (k, at):
        values = []
        for classes, correct in zip(cond.classes, cond.correct, strict=True):
            right, wrong, none = _sizes(classes, correct)
            values.append(maj_at_k([s * IID_SCALE for s in right], [s * IID_SCALE for s in wrong], none * IID_SCALE, kk))
        out[f"maj@{kk}"] = np.array(values)
    return out


def estimates(cond: Condition, rows: np.ndarray, draws: np.ndarray, k: int, at: int) -> dict[str, np.ndarray]:
    """Per drawn problem, the report's per-problem value of each metric from its k drawn answers."""
    classes = np.take_along_axis(cond.classes[rows], draws, axis=1)
    correct = np.take_along_axis(cond.correct[rows], draws, axis=1)
    c = correct.sum(axis=1)
    out = {"mean": c / k, f"pass@{k}": (c > 0).astype(float), f"pass@{at}": np.array([pass_at_k(k, int(x), at) for x in c])}
    out[f"maj@{k}"] = np.array([float(majority_correct([None if x < 0 else int(x) for x in cl], list(co)))
                               for cl, co in zip(classes, correct, strict=True)])
    out[f"maj@{at}"] = np.array([maj_at_k(*_sizes(cl, co), at) for cl, co in zip(classes, correct, strict=True)])
    return out


@dataclass
class Tally:
    """One cell's draws: intervals and point estimates, scored against both truths at the end."""

    low: list[float]
    high: list[float]
    point: list[float]
    other_hit: list[bool]

    @classmethod
    def empty(cls) -> Tally:
        return cls([], [], [], [])

    def add(self, interval: tuple[float, float] | None, point: float, other_truth: float) -> None:
        lo, hi = interval if interval is not None else (point, point)
        self.low.append(lo)
        self.high.append(hi)
        self.point.append(point)
        self.other_hit.append(bool(lo - 1e-12 <= other_truth <= hi + 1e-12))

    def row(self, truth: float) -> tuple[float, float, float]:
        low, high, point = np.array(self.low), np.array(self.high), np.array(self.point)
        coverage = float(np.mean((low - 1e-12 <= truth) & (truth <= high + 1e-12)))
        known = 2 * Z * float(np.std(point))
        width = float(np.mean(high - low)) / known if known > 0 else float("nan")
        return coverage, float(np.mean(self.other_hit)), width


def plain_ci(values: np.ndarray) -> tuple[float, float]:
    """The interval the report printed before: the plain percentile bootstrap (2.5 % tails), same resamples."""
    low, high = np.quantile(resampled_means(values, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED), [0.025, 0.975])
    return float(low), float(high)


def draw_rows(rng: np.random.Generator, n_problems: int, pooled: bool, size: int) -> np.ndarray:
    return rng.integers(0, n_problems, size) if pooled else np.arange(n_problems)


def run_design(conds: tuple[Condition, Condition], truth_these: dict[str, np.ndarray], truth_pair: np.ndarray,
               args: argparse.Namespace, pooled: bool, seed: int) -> dict[str, object]:
    """All draws of one design: per benchmark (these problems) or 30 of the 90 pooled (problems like them)."""
    rng = np.random.default_rng(seed)
    final, budget = conds
    n_problems = final.correct.shape[0]
    tallies: dict[tuple[str, str], Tally] = {}
    declared = {"sign-flip p<0.05": 0, "bootstrap excludes 0": 0, "sampling excludes 0": 0}
    for _ in range(args.draws):
        rows = draw_rows(rng, n_problems, pooled, args.problems)
        draws = rng.integers(0, final.correct.shape[1], (rows.size, args.k))
        values = estimates(final, rows, draws, args.k, args.at)
        for metric, v in values.items():
            these_truth = float(truth_these[metric][rows].mean())  # the drawn problems' own truth
            tallies.setdefault((metric, "bootstrap"), Tally.empty()).add(bootstrap_ci(v), float(v.mean()), these_truth)
            if args.plain:
                tallies.setdefault((metric, "plain"), Tally.empty()).add(plain_ci(v), float(v.mean()), these_truth)
            if metric == "mean":
                c = np.rint(v * args.k).astype(int)
                tallies.setdefault((metric, "sampling"), Tally.empty()).add(
                    sampling_interval(c, np.full(c.size, args.k)), float(v.mean()), these_truth)
        for name, other in (("budget", budget), ("null", final)):
            b_draws = rng.integers(0, other.correct.shape[1], (rows.size, args.k))
            a = final.correct[rows[:, None], draws].sum(axis=1)
            b = other.correct[rows[:, None], b_draws].sum(axis=1)
            diffs = (a - b) / args.k
            these_truth = float(truth_pair[name][rows].mean())
            boot = paired_bootstrap_ci(diffs)
            samp = paired_sampling_interval(a, b, args.k)
            tallies.setdefault((f"paired {name}", "bootstrap"), Tally.empty()).add(boot, float(diffs.mean()), these_truth)
            tallies.setdefault((f"paired {name}", "sampling"), Tally.empty()).add(samp, float(diffs.mean()), these_truth)
            if args.plain:
                tallies.setdefault((f"paired {name}", "plain"), Tally.empty()).add(plain_ci(diffs), float(diffs.mean()),
                                                                                    these_truth)
            if name == "null":
                declared["sign-flip p<0.05"] += sign_flip_test(diffs).p_value < 0.05
                declared["bootstrap excludes 0"] += boot is not None and not boot[0] <= 0 <= boot[1]
                declared["sampling excludes 0"] += samp is not None and not samp[0] <= 0 <= samp[1]
    return {"tallies": tallies, "declared": {k: v / args.draws for k, v in declared.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("PARALLEL_PROBE_DATA", str(DEFAULT_DATA)))
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--at", type=int, default=4, help="the smaller K of pass@K and maj@K (report --at)")
    parser.add_argument("--problems", type=int, default=30, help="problems per draw of the pooled design")
    parser.add_argument("--tasks", default="", help="benchmarks to draw per task (default all; 'pooled': none; the pooled design uses all)")
    parser.add_argument("--plain", action="store_true",
                        help="also score the plain percentile bootstrap the report printed before (rows 'plain')")
    parser.add_argument("--require", action="store_true", help="exit 1 when a cell's own coverage is below 93 %%")
    args = parser.parse_args()
    data = Path(args.data)
    if not data.is_dir() or not list(data.glob("*.json")):
        print(f"skipped: no Parallel-Probe trajectories at {data} (set PARALLEL_PROBE_DATA)")
        return 0
    start = time.perf_counter()
    benches = load(data)
    pooled = tuple(Condition(np.concatenate([b[i].classes + 100_000 * j for j, b in enumerate(benches.values())]),
                             np.concatenate([b[i].correct for b in benches.values()])) for i in (0, 1))
    wanted = args.tasks.split(",") if args.tasks else list(benches)  # "pooled": the pooled design only
    designs = [(task, benches[task], False) for task in wanted if task in benches]
    designs.append(("pooled 90", pooled, True))
    print(f"{args.draws} draws per cell, k = {args.k}, --at {args.at}; loaded in {time.perf_counter() - start:.1f} s")
    header = "| design | metric | interval (its estimand) | covers these problems | covers problems like them | width / known-variance |"
    lines = [header, "|" + "---|" * 6]
    failures = []
    for index, (name, conds, is_pooled) in enumerate(designs):
        t0 = time.perf_counter()
        truth = truths(conds[0], args.k, args.at)
        p_final, p_budget = conds[0].correct.mean(axis=1), conds[1].correct.mean(axis=1)
        pair = {"budget": p_final - p_budget, "null": np.zeros_like(p_final)}
        result = run_design(conds, truth, pair, args, is_pooled, seed=index)
        for (metric, kind), tally in result["tallies"].items():  # type: ignore[attr-defined]
            per_problem = pair[metric.split()[1]] if metric.startswith("paired") else truth[metric]
            cover, these, width = tally.row(float(per_problem.mean()))  # per task, the design's truth is these problems'
            like = f"{cover:.1%}" if is_pooled else "-"
            own = these if kind == "sampling" else cover
            if kind != "plain" and (kind == "sampling" or is_pooled) and own < 0.93:
                failures.append(f"{name} {metric} {kind}: {own:.1%}")
            shown = f"{width:.2f}" if (kind != "sampling") == is_pooled else "-"
            estimand = "these problems" if kind == "sampling" else "problems like them"
            lines.append(f"| {name} | {metric} | {kind} ({estimand}) | {these:.1%} | {like} | {shown} |")
        print(f"{name}: {time.perf_counter() - t0:.1f} s; null pair declares a sign: "
              + ", ".join(f"{k} {v:.1%}" for k, v in result["declared"].items()))  # type: ignore[attr-defined]
    print("\n".join(lines))
    print(f"cells below 93 % on their own estimand: {len(failures)}" + (": " + "; ".join(failures) if failures else ""))
    print(f"total {time.perf_counter() - start:.1f} s")
    return 1 if failures and args.require else 0


if __name__ == "__main__":
    sys.exit(main())
