"""The nano CI slice over many draws: how far each learning check clears its bar, and how broken trainers fail it.

    python bench/bench_nano_draws.py --draws 20 --out /tmp/draws              # 20 held-out draws, working trainer
    python bench/bench_nano_draws.py --draws 20 --variant lr0 --out /tmp/d0   # the null: learning rate 0
    python bench/bench_nano_draws.py --draws 20 --variant sign                # reward sign flipped (noadv, nospans too)
    python bench/bench_frozen_draws.py --from /tmp/draws --out /tmp/frozen    # learning rate 0, a minute a draw
    python bench/bench_frozen_draws.py --from /tmp/draws --out /tmp/noadv --variant noadv   # advantages zeroed
    python bench/bench_nano_draws.py --summarise /tmp/draws /tmp/d0 ...       # the table of finished folders
    python bench/bench_nano_draws.py --summarise /tmp/draws --recheck         # first bring old draws up to the
                                                                              # frozen-control checks (rewrites them)

What a new machine is: it trains other tiny-model weights from the same seed (other floats) and so
draws other rollouts. A draw here is both, made on purpose: draw d trains the tiny models from seed
``1000 + d`` (held out: CI uses seed 0) and sets ``actor_rollout_ref.rollout.seed`` to d. Each draw is
the CI slice (``bench_nano.py --plan ci``, without scoring), into ``OUT/draw-<d>``; its ``nano.json``
is kept, so an interrupted bench resumes at the first draw without one. ``--variant`` breaks the GRPO
stages' trainer (:mod:`repro.testing.broken`); the checks must then fail. ``nospans`` runs only the
stages it breaks (:func:`touched_stages`); learning rate 0 leaves the weights as they were and zeroed
advantages leave them to AdamW's weight decay alone, so ``bench_frozen_draws.py`` computes both
variants' verdicts from finished working draws without training (exactly: its ``--proof`` checks the
merged weights of real draws bit for bit).

Prints one row per draw and check (its statistic and verdict), then per variant and check: draws
passed, the statistic's mean, SD and minimum (working trainer) or maximum (broken), its margin to
the bar, and for the working trainer the chance of a draw falling below the bar under a normal fit of
the draws' z (the false-failure rate the table bounds). JSON of every draw in ``OUT/draws.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from repro.nano.checks import Z_MIN
from repro.nano.gain import Z_GAIN, Z_HOLD, gain_check
from repro.nano.job import run_nano, summary_table
from repro.nano.merged_start import CONTROL
from repro.nano.plan import Draw
from repro.testing.broken import VARIANTS

HELD_OUT_SEED = 1000
NEW_PARALLEL = ("parallel ratio holds (against its start)", "parallel ratio trend (reported)")
"""The parallel checks of a saturated start judged against the frozen control (a draw holding one is rechecked)."""
LEARNING_CHECKS = ("beats its start", "reward trend (reported)", "reward rises", "parallel ratio holds",
                   "parallel ratio rises", *NEW_PARALLEL)
"""The checks with a statistic: against :data:`repro.nano.gain.Z_GAIN` (the learning verdict),
−:data:`repro.nano.gain.Z_HOLD` (the parallel ratio against the start model) or :data:`repro.nano.checks.Z_MIN`
(the trends over the steps)."""


def bar_of(check: str) -> float:
    """The bar a check's z is held to (a trend now reported, against its former bar)."""
    if check == "beats its start":
        return Z_GAIN
    if check == NEW_PARALLEL[0]:
        return -Z_HOLD
    return -Z_MIN if check in ("parallel ratio holds", NEW_PARALLEL[1]) else Z_MIN


def _z(figures: str) -> float:
    part = figures.rsplit("z = ", 1)[-1].split()[0] if "z = " in figures else "nan"
    try:
        return float(part)
    except ValueError:
        return math.nan


def touched_stages(variant: str) -> list[str] | None:
    """The stages of the CI slice a breakage changes, where it leaves the others as the working draw runs
    them bit for bit: ``nospans`` breaks the structured actor, so only the structured (Unseen) stages run,
    which start from the structured tiny model, not from the Seen stages (a third of a draw's time). ``None``:
    every stage."""
    from repro.nano.plan import PLANS
    from repro.stages import STAGES

    if variant != "nospans":
        return None
    return [s.name for s in PLANS["ci"] if STAGES[s.stage].structured]


def run_draws(out: Path, draws: int, variant: str, first: int) -> list[dict[str, Any]]:
    """Run (or reuse) each draw's CI slice (only the stages the variant breaks, :func:`touched_stages`);
    one record per draw."""
    found = []
    for d in range(first, first + draws):
        folder = out / f"draw-{d}"
        if not (folder / "nano.json").is_file():
            started = time.monotonic()
            print(f"draw {d} ({variant}): tiny models from seed {HELD_OUT_SEED + d}, rollout seed {d}", flush=True)
            try:
                report = run_nano(folder, plan="ci", score=False, fresh=True,
                                  draw=Draw(tiny_seed=HELD_OUT_SEED + d, rollout_seed=d, variant=variant),
                                  echo=lambda line: None, only=touched_stages(variant))
                print(summary_table(report).splitlines()[-1] + f" ({time.monotonic() - started:.0f} s)", flush=True)
            except Exception as error:  # a broken trainer may crash a stage: that is a failed draw, recorded
                print(f"draw {d}: the job stopped: {str(error).splitlines()[0]}", flush=True)
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "nano.json").write_text(json.dumps({"crashed": str(error)[:2000], "checks": [],
                                                              "draw": {"variant": variant}}) + "\n", encoding="utf-8")
        found.append({**json.loads((folder / "nano.json").read_text(encoding="utf-8")), "index": d, "folder": str(folder)})
    return found


def rows_of(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (draw, learning check): variant, stage, check, z, verdict."""
    rows = []
    for rec in records:
        variant = rec.get("draw", {}).get("variant", "ok")
        if rec.get("crashed"):
            rows.append({"variant": variant, "draw": rec["index"], "stage": "-", "check": "job crashed", "z": math.nan,
                         "passed": False})
            continue
        for check in rec["checks"]:
            name = check["check"]
            if name in LEARNING_CHECKS or name.startswith("structured engine"):
                rows.append({"variant": variant, "draw": rec["index"], "stage": check["stage"], "check": name,
                             "z": _z(check["figures"]), "passed": check["passed"]})
    return rows


def recheck(folder: Path) -> None:
    """Bring a draw finished before the frozen-control checks (:mod:`repro.nano.gain`) to what the job checks
    now, from the draw's own start models (their weight digests checked against the ones recorded), merged
    checkpoints and stored rollouts: "beats its start", and the parallel ratio
    (:func:`repro.nano.job.parallel_checks`: against the start model, on the same samples, where the reward
    pays for blocks every step). A stage is recomputed where either is missing, and every RL stage of a draw
    whose frozen control was the start as stored rather than as the merge writes it
    (:data:`repro.nano.merged_start.CONTROL`); its recomputed checks replace
    its old ones (marked ``rechecked``), and a "beats its start" the draw recorded is compared with the
    recomputed one (the same seeds: equal on the machine that drew it). Rewrites the draw's ``nano.json``."""
    from pr1_eval.testing.tiny_model import cached_tiny_model
    from repro.nano.job import frozen_control, parallel_checks, reward_parallel_demand
    from repro.nano.plan import PLANS, Scale
    from repro.nano.provenance import weights_digest
    from repro.nano.stored import stored_steps

    record = json.loads((folder / "nano.json").read_text(encoding="utf-8"))
    if record.get("crashed"):
        return
    stale = record.get("frozen_control") != CONTROL  # drawn before the control was the start as merged
    d, scale = int(folder.name.split("-")[-1]), Scale()
    merged = {s["name"]: folder / s["merged"].split(f"/{folder.name}/", 1)[1] for s in record["stages"] if s["merged"]}
    for stage in PLANS[record["plan"]]:
        if stage.name not in record["targets"] or stage.name not in merged:
            continue
        mine = [c for c in record["checks"] if c["stage"] == stage.name]
        demand = reward_parallel_demand(stage)
        recorded = next((c for c in mine if c["check"].startswith("beats its start")), None)
        if not stale and (any(c.get("rechecked") or c["check"] in NEW_PARALLEL for c in mine) or (
                recorded is not None and demand != "every step")):
            continue  # already what the job checks now
        start = (str(cached_tiny_model(kind=stage.start.split(":", 1)[1], seed=HELD_OUT_SEED + d))
                 if stage.start.startswith("tiny:") else str(merged[stage.start]))
        if weights_digest(start) != record["start_weights"].get(stage.name):
            print(f"{folder}: {stage.name}'s start model is not the one the draw recorded; not rechecked", flush=True)
            continue
        control = frozen_control(stage, start, str(merged[stage.name]), record["targets"][stage.name]["target"], scale)
        beats = gain_check(stage.name, control[0].earned, control[1].earned, required=stage.expect_rise)
        if recorded is not None and _z(recorded["figures"]) != _z(beats.figures):
            print(f"{folder.name} {stage.name}: beats its start recomputed z = {_z(beats.figures)}, the draw recorded "
                  f"{_z(recorded['figures'])} (another machine or code: the recomputed one is kept)", flush=True)
        runs = stored_steps(folder / stage.name / "rollout_runs" / "train")
        new = [beats, *parallel_checks(stage.name, {s: r["parallel_groups"] for s, r in runs.items()}, demand, control)]
        record["checks"] = [c for c in record["checks"] if c["stage"] != stage.name
                            or not c["check"].startswith(("beats its start", "parallel ratio"))]
        record["checks"] += [c.as_dict() | {"rechecked": True} for c in new]
        for c in new:
            print(f"{folder.name} {stage.name} {c.name}: {c.figures}", flush=True)
    record["passed"] = bool(record["checks"]) and all(c["passed"] for c in record["checks"])
    record["frozen_control"] = CONTROL
    (folder / "nano.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def normal_tail(values: list[float], bar: float) -> float:
    """P(z < bar) under a normal fit of ``values`` (the working draws' z): what 20 draws can say about
    the false-failure rate beyond 'none of them failed'."""
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) < 3:
        return math.nan
    sd = statistics.stdev(finite)
    if sd == 0:
        return 0.0 if statistics.fmean(finite) >= bar else 1.0
    return 0.5 * math.erfc((statistics.fmean(finite) - bar) / sd / math.sqrt(2))


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """Per variant and (stage, check): passed, z mean / SD / min / max, margin to the bar."""
    header = f"{'variant':8} {'stage':12} {'check':40} {'passed':>8} {'z mean':>7} {'z SD':>5} {'z min':>6} {'z max':>6}" \
             f" {'margin':>7} {'P(z<bar), normal fit':>21}"
    lines = [header]
    keys = sorted({(r["variant"], r["stage"], r["check"]) for r in rows}, key=lambda k: (VARIANTS.index(k[0])
                                                                                          if k[0] in VARIANTS else 9, k))
    for variant, stage, check in keys:
        group = [r for r in rows if (r["variant"], r["stage"], r["check"]) == (variant, stage, check)]
        zs = [r["z"] for r in group if not math.isnan(r["z"])]
        passed = sum(r["passed"] for r in group)
        if zs:
            finite = [z for z in zs if math.isfinite(z)]
            mean = statistics.fmean(finite) if finite else math.nan
            sd = statistics.stdev(finite) if len(finite) > 1 else math.nan
            low, high = min(zs), max(zs)
            bar = bar_of(check)
            margin = (low - bar) if variant == "ok" else (bar - high)
            tail = normal_tail(zs, bar) if variant == "ok" else math.nan
            lines.append(f"{variant:8} {stage:12} {check:40} {passed:>3} of {len(group):<2} {mean:7.2f} {sd:5.2f} "
                         f"{low:6.2f} {high:6.2f} {margin:7.2f} {tail:21.2g}")
        else:
            lines.append(f"{variant:8} {stage:12} {check:40} {passed:>3} of {len(group):<2} {'(no statistic)':>36}")
    lines.append(f"bar: beats its start z ≥ {Z_GAIN} (Mantel–Haenszel z of the trained model against the frozen start "
                 f"model, repro.nano.gain); parallel ratio holds (against its start) z > −{Z_HOLD} (the same "
                 f"statistic on the samples' block flags); the trends z ≥ {Z_MIN} (parallel ratio holds and its trend "
                 f"reported: z > −{Z_MIN}; the within-problem "
                 "trend of prompt-group means, repro.nano.checks.trend_z); margin = how far the worst draw is on the "
                 "right side of the bar (working trainer: lowest z − bar; broken: bar − highest z)")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="/tmp/pr1-nano-draws", help="folder of the draws (resumed if present)")
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--first", type=int, default=0, help="number of the first draw")
    parser.add_argument("--variant", default="ok", choices=VARIANTS)
    parser.add_argument("--summarise", nargs="+", metavar="OUT", default=None,
                        help="only print the table of these finished bench folders")
    parser.add_argument("--recheck", action="store_true",
                        help="with --summarise: first bring draws finished without the frozen-control checks "
                             "('beats its start', 'parallel ratio holds (against its start)') up to them")
    args = parser.parse_args()
    if args.summarise and args.recheck:
        for folder in args.summarise:
            for path in sorted(Path(folder).glob("draw-*/nano.json")):
                recheck(path.parent)
    if args.summarise:
        records = [json.loads(p.read_text(encoding="utf-8")) | {"index": int(p.parent.name.split("-")[-1])}
                   for folder in args.summarise for p in sorted(Path(folder).glob("draw-*/nano.json"))]
    else:
        out = Path(args.out).expanduser().resolve()
        records = run_draws(out, args.draws, args.variant, args.first)
        (out / "draws.json").write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    rows = rows_of(records)
    print("\n".join(f"{r['variant']:8} draw {r['draw']:>3} {r['stage']:12} {r['check']:40} z = {r['z']:6.2f} "
                    f"{'pass' if r['passed'] else 'FAIL'}" for r in rows))
    print("\n" + "\n".join(summary(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
