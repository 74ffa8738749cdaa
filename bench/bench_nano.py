"""The nano curriculum as a bench: every stage through VERL on CPU, its figures, and the Unseen gap.

    python bench/bench_nano.py --out /tmp/nano            # the whole curriculum (~40 min on 2 cores)
    python bench/bench_nano.py --plan ci --out /tmp/nano --repeat unseen-s2  # what .ci/run runs

Prints, per stage, VERL's own first and last figures (SFT loss; GRPO reward, rollout/actor KL) and
its wall time; then the checks of ``repro.nano.checks``, each beside its rule; then the Unseen
recipe's rollout/actor log-prob gap by token region (:mod:`repro.nano.positions`), on the first
Unseen checkpoint the job merged. ``--repeat STAGE`` trains that stage a second time from the same
start and adds the check that every step's figures are the same (:mod:`repro.nano.repeat`). Exit
status 1 when a check fails. The baseline of the gap table is the serving positions: "training vs
serving positions" isolates what the structured positions alone change.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from dataclasses import replace
from pathlib import Path

from pr1_eval.inputs.prompts import load_template
from pr1_eval.testing.tiny_traces import make_question
from repro import stages
from repro.nano import checks
from repro.nano.job import NanoReport, run_nano, stage_data, summary_table
from repro.nano.plan import Scale
from repro.nano.positions import REGIONS, position_gap
from repro.nano.repeat import compare_jobs, same_twice
from repro.nano.runner import StageResult, run_stage
from repro.nano.stored import stored_steps

STAGE_HEADER = ("stage", "kind", "steps", "wall s", "VERL first → last", "what", "rollout_corr/kl first → last")
STAGE_NOTE = """\
VERL first → last: SFT train/loss = mean NLL per response token, nats. A uniform guess over the tiny
  vocabulary of 800 scores ln 800 = 6.68; the trained tiny model starts higher because it is
  confidently wrong on Parallel-GSM8K text (the untrained one scores 6.70: repro/nano/checks.py).
  GRPO critic/score/mean = mean reward per rollout, in the stage's reward units (parallel_accuracy:
  0 or 1; the S2 reward: −1, +1, +1.2).
rollout_corr/kl = VERL's mean over response tokens of log π_rollout − log π_actor on the sampled
  tokens, nats per token: ≈ 0 when the sampler holds the trainer's weights; 0.2–0.4 on Unseen stages,
  where the serving engine's positions are not the structured actor's (the gap table below).
wall s = seconds from the stage's start to its merged checkpoint."""


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


def repeat_stage(report: NanoReport, name: str) -> checks.Check:
    """Train stage ``name`` a second time from the same start model; the check that its figures repeat."""
    first = next((r for r in report.stages if r.stage.name == name), None)
    if first is None:
        return checks.Check(name, "same figures twice", False, "the stage is not in this plan", "--repeat names a stage")
    second = run_stage(first.stage, first.start_model, report.out / "repeat", stage_data(first.stage, report.out),
                       Scale(), print)
    if first.kind == "sft":
        return same_twice(name, first.metrics, second.metrics)

    def rewards(result: StageResult) -> dict[int, list[float]]:
        return {s: run["rewards"] for s, run in stored_steps(result.rollout_runs / "train").items()}

    return same_twice(name, first.metrics, second.metrics, rewards(first), rewards(second))


def stage_table(report: NanoReport) -> str:
    """One labelled line per stage, then what the columns mean."""
    rows = [STAGE_HEADER]
    for r in report.stages:
        key, what = ("train/loss", "loss, nats/token") if r.kind == "sft" else ("critic/score/mean", "mean reward")
        rows.append((r.stage.name, r.kind, str(r.stage.steps), f"{r.seconds:.0f}", _first_last(r.metrics, key), what,
                     _first_last(r.metrics, "rollout_corr/kl")))
    widths = [max(len(row[i]) for row in rows) for i in range(len(STAGE_HEADER))]
    lines = ["  ".join(c.rjust(w) if i in (2, 3) else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
             for row in rows]
    return "\n".join([*lines, STAGE_NOTE])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="/tmp/pr1-nano-bench", help="job folder (emptied first)")
    parser.add_argument("--plan", default="full", choices=["full", "ci"])
    parser.add_argument("--gap-problems", type=int, default=6, help="problems of the gap measurement")
    parser.add_argument("--gap-samples", type=int, default=2, help="fork-join rollouts per problem")
    parser.add_argument("--repeat", action="append", default=[], metavar="STAGE",
                        help="train STAGE a second time from the same start; its figures must repeat (repeatable)")
    parser.add_argument("--compare", metavar="OUT", default=None,
                        help="an earlier job folder of the same plan: every shared stage's figures must be the same")
    parser.add_argument("--frozen-control", action="store_true",
                        help="rerun the Seen GRPO stage with a rollout server that ignores weight syncs; its "
                             "on-policy check must fail")
    args = parser.parse_args()
    started = time.monotonic()
    report = run_nano(Path(args.out), plan=args.plan, fresh=True)
    for name in args.repeat:
        report.checks.append(repeat_stage(report, name))
    if args.compare:
        report.checks += [replace(c, name=f"same as {args.compare}") for c in compare_jobs(Path(args.compare), report.out)]
    report.seconds = time.monotonic() - started
    (report.out / "nano.json").write_text(json.dumps(report.as_dict(), indent=2) + "\n", encoding="utf-8")
    print("\n" + stage_table(report))
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
