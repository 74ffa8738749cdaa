"""The nano curriculum as a bench: every stage through VERL on CPU, its figures, and the Unseen gap.

    python bench/bench_nano.py --out /tmp/nano            # the whole curriculum (~40 min on 2 cores)
    python bench/bench_nano.py --plan ci --out /tmp/nano  # the slice .ci/run runs (~10 min)

Prints, per stage, VERL's own first and last figures (SFT loss; GRPO reward, rollout/actor KL) and
its wall time; then the checks of ``repro.nano.checks``; then the Unseen recipe's rollout/actor
log-prob gap by token region (:mod:`repro.nano.positions`), on the first Unseen checkpoint the job
merged. Exit status 1 when a check fails. The baseline of the gap table is the serving positions:
"training vs serving positions" isolates what the structured positions alone change.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from pathlib import Path

from pr1_eval.inputs.prompts import load_template
from pr1_eval.testing.tiny_traces import make_question
from repro import stages
from repro.nano import checks
from repro.nano.job import NanoReport, run_nano, summary_table
from repro.nano.plan import Scale
from repro.nano.positions import REGIONS, position_gap
from repro.nano.runner import run_stage


def _first_last(metrics: dict[int, dict[str, float]], key: str) -> str:
    values = [m[key] for _, m in sorted(metrics.items()) if key in m]
    return f"{values[0]:.4g} → {values[-1]:.4g}" if values else "-"


def gap_table(gap: dict[str, object]) -> str:
    lines = [f"Unseen rollout/actor log-prob gap on {gap['model']} ({gap['rollouts']} fork-join rollouts, "
             f"{gap['blocks']} blocks): mean |Δ| (max) per response token, nats"]
    lines.append(f"{'region':8} {'tokens':>6}  {'actor vs rollout':>22}  {'training vs serving positions':>30}")
    a, b = gap["actor_vs_rollout"], gap["training_vs_serving_positions"]
    assert isinstance(a, dict) and isinstance(b, dict)
    for region in REGIONS:
        lines.append(f"{region:8} {a[region]['tokens']:>6}  {a[region]['mean_abs']:>10.4f} ({a[region]['max_abs']:.3f})"
                     f"  {b[region]['mean_abs']:>16.4f} ({b[region]['max_abs']:.3f})")
    return "\n".join(lines)


def frozen_control(report: NanoReport, out: Path) -> checks.Check | None:
    """The Seen GRPO stage again with a rollout server that drops every weight sync: its on-policy
    check must FAIL (the trainer moves, the sampler does not). Returns that check."""
    seen_rl = next((r for r in report.stages if r.kind == "ppo" and not stages.STAGES[r.stage.stage].structured), None)
    if seen_rl is None:
        return None
    result = run_stage(seen_rl.stage, seen_rl.start_model, out / "control-frozen", report.out / "data", Scale(),
                       print, frozen=True)
    return checks.on_policy(f"{seen_rl.stage.name} frozen", result.metrics)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="/tmp/pr1-nano-bench", help="job folder (emptied first)")
    parser.add_argument("--plan", default="full", choices=["full", "ci"])
    parser.add_argument("--gap-problems", type=int, default=6, help="problems of the gap measurement")
    parser.add_argument("--gap-samples", type=int, default=2, help="fork-join rollouts per problem")
    parser.add_argument("--frozen-control", action="store_true",
                        help="rerun the Seen GRPO stage with a rollout server that ignores weight syncs; its "
                             "on-policy check must fail")
    args = parser.parse_args()
    started = time.monotonic()
    report = run_nano(Path(args.out), plan=args.plan, fresh=True)
    print(f"\n{'stage':12} {'kind':4} {'steps':>5} {'wall s':>7}  {'VERL: loss / reward':>24}  {'rollout_corr/kl':>22}")
    for r in report.stages:
        key = "train/loss" if r.kind == "sft" else "critic/score/mean"
        print(f"{r.stage.name:12} {r.kind:4} {r.stage.steps:>5} {r.seconds:>7.0f}  {_first_last(r.metrics, key):>24}"
              f"  {_first_last(r.metrics, 'rollout_corr/kl'):>22}")
    unseen = next((r for r in report.stages if stages.STAGES[r.stage.stage].structured and r.kind == "sft"), None)
    model = unseen.merged if unseen else next((r.start_model for r in report.stages
                                               if stages.STAGES[r.stage.stage].structured), None)
    if model:
        rng = random.Random(7)
        template = load_template("parallel_r1_v3").text
        prompts = [template.replace("{problem}", make_question(rng).text) for _ in range(args.gap_problems)]
        gap = position_gap(model, prompts, samples=args.gap_samples)
        (Path(args.out) / "position_gap.json").write_text(json.dumps(gap, indent=2) + "\n", encoding="utf-8")
        print("\n" + gap_table(gap))
    control_ok = True
    if args.frozen_control:
        control = frozen_control(report, Path(args.out))
        if control is not None:
            control_ok = not control.passed
            print(f"\nfrozen-server control: on-policy check {'failed, as it must' if control_ok else 'PASSED: the check cannot see a broken sync'}"
                  f" ({control.figures})")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"\npeak RSS of one child process {peak:.0f} MB; whole bench {time.monotonic() - started:.0f} s")
    print(summary_table(report))
    return 0 if report.passed and control_ok else 1


if __name__ == "__main__":
    sys.exit(main())
