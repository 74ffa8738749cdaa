"""Benchmark: the nano learning verdict's statistic under the null, on the real tiny start models.

The nano slice's learning verdict (:mod:`repro.nano.gain`) is a Mantel–Haenszel z of the trained
model against its frozen start. A learning-rate-0 stage leaves the weights as they were, so its z is
the z of the start model against *itself*, sampled twice with independent seeds. This bench draws
exactly that, many times, without training anything: for each start model it chooses the stage's gold
as the job does (:func:`repro.nano.targets.choose_target`), then for each of ``--pairs`` seed pairs
samples the start model twice on the stage's problems and computes z. What it shows:

- **calibration**: mean ≈ 0 and SD ≈ 1 (the z is exact in its moments under the null; a z with
  clustered rollouts treated as independent would show SD > 1 here);
- **the null's distance from the bar**: the largest z drawn and the normal fit's chance of a frozen
  stage reaching :data:`repro.nano.gain.Z_GAIN` (a broken trainer passing).

A learning-rate-0 draw of ``bench_nano_draws.py --variant lr0`` costs a whole CI slice (about 15
minutes on two cores); a pair here costs two samplings (about 20 s), so the null's distribution is
measured with many draws per model. Models: the Unseen start (``trained-structured``, fork-join
sampling, reward ``parallel_accuracy``) and the causal ``trained`` model (plain sampling, ``accuracy``:
the Seen stage's reward on the Seen SFT's own start), each from the tiny seeds given.

    python bench/bench_gain_null.py --pairs 20 --seeds 0,1002     # the table in docs/performance.md
    python bench/bench_gain_null.py --small                       # what bench/smoke.sh runs
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from repro.nano import gain  # noqa: E402
from repro.nano.plan import Scale  # noqa: E402

KINDS = {"trained-structured": (True, "parallel_accuracy"), "trained": (False, "accuracy")}


def null_zs(model: str, *, structured: bool, mode: str, pairs: int, problems: int, per_problem: int,
            scale: Scale, small: bool = False) -> tuple[int, float, list[float]]:
    """The stage's gold for ``model`` (its share among the screening rollouts) and ``pairs`` null z's."""
    from repro.nano.targets import choose_target

    screen = {"screen_problems": 2, "confirm_problems": 1, "per_problem": 4} if small else {}
    choice = choose_target(model, structured=structured, mode=mode, response_length=scale.response_length,
                           max_path_tokens=scale.max_path_tokens, problems_needed=problems, seed=0, **screen)
    common: dict[str, Any] = {"structured": structured, "mode": mode, "response_length": scale.response_length,
                              "max_path_tokens": scale.max_path_tokens, "problems": problems,
                              "per_problem": per_problem}
    zs = []
    for j in range(pairs):
        first = gain.earned(model, choice.target, seed=gain.START_SEED + 100 * (j + 1), **common)
        second = gain.earned(model, choice.target, seed=gain.FINAL_SEED + 100 * (j + 1), **common)
        zs.append(gain.mantel_haenszel_z(first, second))
        print(f"  pair {j + 1}/{pairs}: earned {first.mean():.3f} / {second.mean():.3f}, z = {zs[-1]:+.2f}", flush=True)
    return choice.target, choice.share, zs


def row(kind: str, seed: int, target: int, share: float, zs: list[float]) -> str:
    """One line of the summary table."""
    finite = [z for z in zs if math.isfinite(z)]
    mean = statistics.fmean(finite) if finite else math.nan
    sd = statistics.stdev(finite) if len(finite) > 1 else math.nan
    tail = 0.5 * math.erfc((gain.Z_GAIN - mean) / sd / math.sqrt(2)) if sd and math.isfinite(sd) else math.nan
    return (f"{kind:19} {seed:5d} {target:6d} {share:6.3f} {len(zs):5d} {mean:+7.2f} {sd:6.2f} "
            f"{max(zs):+6.2f} {gain.Z_GAIN - max(zs):7.2f} {tail:10.1e}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20, help="null draws (seed pairs) per model")
    parser.add_argument("--seeds", default="0", help="tiny-model seeds, comma separated (CI's is 0)")
    parser.add_argument("--kinds", default="trained-structured,trained")
    parser.add_argument("--small", action="store_true", help="2 pairs of 4 problems × 4 samples, one model")
    args = parser.parse_args(argv)
    from pr1_eval.testing.tiny_model import cached_tiny_model

    problems, per_problem, pairs = (4, 4, 2) if args.small else (gain.PROBLEMS, gain.PER_PROBLEM, args.pairs)
    kinds = ["trained-structured"] if args.small else args.kinds.split(",")
    lines = []
    started = time.monotonic()
    for kind in kinds:
        structured, mode = KINDS[kind]
        for seed in (int(s) for s in args.seeds.split(",")):
            print(f"{kind} tiny model, seed {seed}: {pairs} null pairs of {problems} × {per_problem}", flush=True)
            model = str(cached_tiny_model(kind, seed=seed))
            target, share, zs = null_zs(model, structured=structured, mode=mode, pairs=pairs, problems=problems,
                                        per_problem=per_problem, scale=Scale(), small=args.small)
            lines.append(row(kind, seed, target, share, zs))
    print(f"\nthe learning verdict's z for a frozen model against itself ({time.monotonic() - started:.0f} s; "
          f"bar z >= {gain.Z_GAIN:g})")
    print(f"{'start model':19} {'seed':>5} {'target':>6} {'share':>6} {'pairs':>5} {'z mean':>7} {'z SD':>6} "
          f"{'z max':>6} {'margin':>7} {'P(z>=bar)':>10}")
    print("\n".join(lines))
    print("margin = the bar - the largest null z; P(z>=bar) under a normal fit of the pairs' z")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
