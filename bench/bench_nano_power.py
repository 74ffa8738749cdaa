"""The nano learning check in simulation: its null calibration and its power, by design of the GRPO stage.

    python bench/bench_nano_power.py --runs 400      # the table of docs/performance.md (about a minute)
    python bench/bench_nano_power.py --runs 20       # the smoke size

A simulated stage is what the CI slice's reward check reads: P problems with their own chance of a
reward (Beta(1, 4)-spread, mean 0.2, like the tiny models' golds), met once an epoch in a shuffled
order, ``prompts`` problems × ``n`` rollouts a step, ``steps`` steps; a learning policy adds ``lift``
to every chance per step. For each setting it prints the mean and SD of the check's z
(:func:`repro.nano.checks.trend_z`, within-problem) beside a plain regression over the group means
(the named baseline, computed here with scipy), and the share of runs passing the bar: for a frozen
policy that is the false-pass rate of a broken trainer, for a learning one the power (1 − the
false-failure rate of a good commit).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scipy import stats  # noqa: E402

from repro.nano.checks import Z_MIN, trend_z  # noqa: E402

SETTINGS = (  # (lift per step, rollouts, prompts a step, steps): the CI slice is 8 × 4 × 8
    (0.0, 8, 4, 8), (0.03, 8, 4, 8), (0.05, 8, 4, 8), (0.07, 8, 4, 8),
    (0.07, 16, 4, 8), (0.07, 8, 8, 8), (0.049, 8, 4, 12),
)


def simulate(rng: random.Random, lift: float, n: int, prompts: int, steps: int,
             problems: int = 16) -> dict[int, dict[str, list[float]]]:
    """One stage's stored rewards, by step and problem."""
    chance = [rng.betavariate(1.0, 4.0) for _ in range(problems)]
    order: list[int] = []
    while len(order) < prompts * steps:
        epoch = list(range(problems))
        rng.shuffle(epoch)
        order += epoch
    return {s: {f"p{p}": [float(rng.random() < min(1.0, chance[p] + lift * (s - 1))) for _ in range(n)]
                for p in order[(s - 1) * prompts:s * prompts]} for s in range(1, steps + 1)}


def plain_z(by_step: dict[int, dict[str, list[float]]]) -> float:
    """The baseline: an OLS slope over every group's mean, problems ignored."""
    points = [(s, sum(v) / len(v)) for s, groups in by_step.items() for v in groups.values()]
    fit = stats.linregress([x for x, _ in points], [y for _, y in points])
    return float(stats.norm.isf(stats.t.sf(fit.slope / fit.stderr, len(points) - 2)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=400, help="simulated stages per setting")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"{'lift/step':>9} {'n':>3} {'prompts':>7} {'steps':>5}  {'within z mean':>13} {'SD':>5} {'pass':>6}"
          f"  {'plain z mean':>12} {'SD':>5} {'pass':>6}")
    for lift, n, prompts, steps in SETTINGS:
        runs = [simulate(rng, lift, n, prompts, steps) for _ in range(args.runs)]
        within = [trend_z(r)[0] for r in runs]
        plain = [plain_z(r) for r in runs]
        cells = []
        for zs in (within, plain):
            cells.append(f"{statistics.fmean(zs):13.2f} {statistics.stdev(zs):5.2f} "
                         f"{sum(z >= Z_MIN for z in zs) / len(zs):6.1%}")
        print(f"{lift:9.3f} {n:3d} {prompts:7d} {steps:5d}  {cells[0]}  {cells[1]}")
    print(f"pass = z ≥ {Z_MIN} (the bar); {args.runs} simulated stages per row; a frozen policy (lift 0) should give "
          "z mean 0, SD 1; 'within' is the check CI runs (repro.nano.checks.trend_z), 'plain' the baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
