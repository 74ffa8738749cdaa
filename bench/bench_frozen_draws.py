"""The learning verdict of a trainer at learning rate 0, or with its advantages zeroed, over many draws,
in a minute a draw.

    python bench/bench_frozen_draws.py --from OK_FOLDER --out OUT                 # one lr-0 draw per working draw
    python bench/bench_frozen_draws.py --from OK_FOLDER --out OUT --variant noadv # one zero-advantage draw each
    python bench/bench_frozen_draws.py --from OK_FOLDER --out OUT --proof LR0_FOLDER NOADV_FOLDER
    python bench/bench_nano_draws.py --summarise OK_FOLDER OUT ...                # the table beside the others
    python bench/bench_frozen_draws.py --small                                    # what bench/smoke.sh runs

**Why this is the learning-rate-0 draw, not a model of it.** A GRPO stage at learning rate 0 changes no
weight: AdamW's step and its decoupled weight decay are both scaled by the learning rate. Its merged
checkpoint is then the start model as VERL's merger writes it (bfloat16), and "beats its start"
(:mod:`repro.nano.gain`) samples that control (:mod:`repro.nano.merged_start`) with seed ``START_SEED``
and the merged model with ``FINAL_SEED``: two samplings of the same weights. Everything else of such a
draw is the working draw's: the Seen SFT stage (the breakages touch the GRPO stages only), so the Seen
start model, and the golds, chosen from the start models before any GRPO step. So the verdict of
learning-rate-0 draw ``d`` is the Mantel–Haenszel z of the control against itself, sampled with the two
seeds, for the start models and golds of working draw ``d``; this bench computes it from a finished
working draw (about a minute of sampling, against 8-15 for the draw's three VERL stages). ``--proof``
checks the argument on real broken draws: every RL stage's merged weights against the computed ones, bit
for bit, and the z of the real draw (its merged model against the control) beside the one computed here.

**The zero-advantage draw, computed the same way** (``--variant noadv``). Zero advantages give a zero
policy-gradient loss and zero gradients (``actor/grad_norm`` 0.0 at every step), so AdamW's update is
zero, but its decoupled weight decay still shrinks every weight by ``1 − lr · weight_decay`` per
optimiser step (32 in a nano stage: × 0.99968). Stored in bfloat16 that is invisible for the Seen
stage's weights (already bfloat16) but moves 6 % of the Unseen stage's (a float32 start), so such a draw
is not the lr-0 draw (its real Unseen z was −0.82 against −0.68 computed as lr 0). Its merged
checkpoint is the start after exactly that decay, replayed step by step in float32 and rounded as the
merge rounds (:func:`repro.nano.merged_start.decayed_state`); ``--proof`` on a real zero-advantage draw
finds every merged weight equal to it and the real z equal to the computed one. Its verdict is then the
control against that model, sampled with the verdict's two seeds.

Each computed draw lands in ``OUT/draw-<d>/nano.json`` (variant ``frozen`` for learning rate 0, ``noadv``
for zeroed advantages, both with ``computed`` saying how; the checks the job draws from the two
samplings), so ``bench_nano_draws.py --summarise`` tables it beside the working and broken draws.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def stage_models(folder: Path, record: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Per RL stage of a finished draw: (its start model as recorded, its merged checkpoint), the start's
    digest checked against the one the draw recorded."""
    from repro.nano.provenance import weights_digest

    found = {}
    for stage in record["stages"]:
        if stage["kind"] != "ppo" or not stage.get("merged"):
            continue
        start = stage["start"]
        if "/" + folder.name + "/" in start:  # a checkpoint of the draw itself: read it where the draw now is
            start = str(folder / start.split(f"/{folder.name}/", 1)[1])
        merged = str(folder / stage["merged"].split(f"/{folder.name}/", 1)[1])
        if weights_digest(start) != record["start_weights"].get(stage["name"]):
            raise SystemExit(f"{folder}: {stage['name']}'s start model {start} is not the one the draw recorded "
                             "(another tiny-model cache version?); rerun the working draw")
        found[stage["name"]] = (start, merged)
    return found


#: Problems × samples per model of ``--small`` (the bench smoke), against the job's 16 × 16.
SMALL = (2, 2)


def frozen_z(stage_name: str, plan: str, control: str, target: int, trained: str | None = None,
             sizes: tuple[int, int] | None = None) -> tuple[float, list[dict[str, Any]]]:
    """The stage's "beats its start" z with ``trained`` (default: the control itself) as the trained model,
    sampled as the job samples (``sizes``: other problems × samples, for the smoke), and the checks the job
    draws from those samples: "beats its start" and, where the job judges the parallel ratio against the
    start (:func:`repro.nano.job.parallel_checks`), "parallel ratio holds (against its start)" (a computed
    draw has no rollouts, so no trend over the steps)."""
    from repro.nano import gain
    from repro.nano.job import control_sampling, parallel_checks, reward_parallel_demand
    from repro.nano.plan import PLANS, Scale

    stage = next(s for s in PLANS[plan] if s.name == stage_name)
    problems, per_problem = sizes or (gain.PROBLEMS, gain.PER_PROBLEM)
    start, final = gain.frozen_control(control, trained or control, target, **control_sampling(stage, Scale()),
                                       problems=problems, per_problem=per_problem)
    found = [gain.gain_check(stage_name, start.earned, final.earned, required=stage.expect_rise)]
    found += [c for c in parallel_checks(stage_name, {}, reward_parallel_demand(stage), (start, final))
              if c.name == "parallel ratio holds (against its start)"]
    return gain.mantel_haenszel_z(start.earned, final.earned), [c.as_dict() for c in found]


#: What each computed variant's merged checkpoint is, as its ``nano.json`` says (``computed``).
COMPUTED = {"frozen": "learning rate 0: the merged checkpoint is the start as the merge writes it",
            "noadv": "advantages zeroed: the merged checkpoint is the start after the stage's AdamW weight decay "
                     "alone, as the merge writes it"}


def computed_model(variant: str, plan: str, stage_name: str, start: str, beside: Path) -> str | None:
    """The merged checkpoint a stage broken by ``variant`` writes, computed from its start into ``beside``
    (``None`` for learning rate 0: the control itself)."""
    from repro.nano.merged_start import decayed_as_merged
    from repro.nano.plan import PLANS, Scale, optimiser_steps

    if variant == "frozen":
        return None
    stage = next(s for s in PLANS[plan] if s.name == stage_name)
    return decayed_as_merged(start, str(beside / "hf"), Scale().rl_lr, optimiser_steps(stage, Scale()))


def frozen_draw(source: Path, out: Path, sizes: tuple[int, int] | None = None,
                variant: str = "frozen") -> dict[str, Any]:
    """The computed ``variant`` draw of working draw ``source`` into ``out/<its name>/nano.json`` (reused
    when present)."""
    from repro.nano.merged_start import start_as_merged

    target_file = out / source.name / "nano.json"
    if target_file.is_file():
        return json.loads(target_file.read_text(encoding="utf-8"))
    record = json.loads((source / "nano.json").read_text(encoding="utf-8"))
    started = time.monotonic()
    checks = []
    for name, (start, _merged) in stage_models(source, record).items():
        control = start_as_merged(start, str(out / source.name / name / "hf"))
        trained = computed_model(variant, record["plan"], name, start, out / source.name / name)
        _z, found = frozen_z(name, record["plan"], control, record["targets"][name]["target"], trained=trained,
                             sizes=sizes)
        checks += found
    result = {"plan": record["plan"], "passed": all(c["passed"] for c in checks), "checks": checks,
              "draw": {**record["draw"], "variant": variant}, "computed": COMPUTED[variant], "source": str(source),
              "seconds": round(time.monotonic() - started, 1)}
    target_file.parent.mkdir(parents=True, exist_ok=True)
    target_file.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def proof(folder: Path, scratch: Path) -> list[str]:
    """For a real broken draw (learning rate 0, advantages zeroed): per RL stage, whether its merged weights
    equal the computed ones bit for bit, and its z (merged against control) beside the computed draw's."""
    import torch

    from repro.nano.merged_start import load_weights, start_as_merged

    record = json.loads((folder / "nano.json").read_text(encoding="utf-8"))
    variant = {"lr0": "frozen", "noadv": "noadv"}[record["draw"]["variant"]]
    lines = []
    for name, (start, merged) in stage_models(folder, record).items():
        beside = scratch / folder.parent.name / folder.name / name
        control = start_as_merged(start, str(beside / "hf"))
        computed = computed_model(variant, record["plan"], name, start, beside) or control
        a, b = load_weights(Path(computed)), load_weights(Path(merged))
        same = a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a)
        target = record["targets"][name]["target"]
        real, _ = frozen_z(name, record["plan"], control, target, trained=merged)
        alone, _ = frozen_z(name, record["plan"], control, target, trained=computed)
        lines.append(f"{record['draw']['variant']:6} {folder.name:8} {name:11} merged == computed: {same}; "
                     f"z merged vs control {real:6.2f}, computed vs control {alone:6.2f}")
    return lines


def small_source(folder: Path) -> Path:
    """A finished working draw as the smoke's stand-in: the CI slice's Unseen stage from the structured tiny
    model (seed 0, what CI trains anyway), gold 2, recorded as the job records it."""
    from pr1_eval.testing.tiny_model import cached_tiny_model
    from repro.nano.provenance import weights_digest

    start = str(cached_tiny_model(kind="trained-structured", seed=0))
    draw = folder / "draw-0"
    draw.mkdir(parents=True, exist_ok=True)
    record = {"plan": "ci", "draw": {"tiny_seed": 0, "rollout_seed": 0, "variant": "ok"},
              "stages": [{"name": "unseen-s2", "kind": "ppo", "start": start, "merged": str(draw / "unseen-s2" / "hf")}],
              "start_weights": {"unseen-s2": weights_digest(start)}, "targets": {"unseen-s2": {"target": 2}}}
    (draw / "nano.json").write_text(json.dumps(record) + "\n", encoding="utf-8")
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="source", help="folder of finished working draws (draw-*/)")
    parser.add_argument("--out", help="where the computed draws go (resumed if present)")
    parser.add_argument("--small", action="store_true",
                        help=f"the smoke: one stand-in draw of each variant, {SMALL[0]} problems × {SMALL[1]} samples, "
                             "in a temporary folder")
    parser.add_argument("--draws", type=int, nargs="*", default=None, help="draw numbers (default: every finished one)")
    parser.add_argument("--variant", choices=sorted(COMPUTED), default="frozen",
                        help="frozen: learning rate 0; noadv: advantages zeroed (default: frozen)")
    parser.add_argument("--proof", nargs="*", default=[], metavar="BROKEN_FOLDER",
                        help="folders of real learning-rate-0 (or zero-advantage) draws to check the argument on")
    args = parser.parse_args()
    if args.small:
        with tempfile.TemporaryDirectory() as scratch:
            source = small_source(Path(scratch) / "ok") / "draw-0"
            for variant in sorted(COMPUTED):
                result = frozen_draw(source, Path(scratch) / variant, sizes=SMALL, variant=variant)
                print(f"{variant} stand-in draw ({SMALL[0]} × {SMALL[1]}): {result['checks'][0]['figures']}")
        return 0
    if not args.source or not args.out:
        parser.error("--from and --out are needed (or --small)")
    source, out = Path(args.source).resolve(), Path(args.out).resolve()
    folders = sorted((p.parent for p in source.glob("draw-*/nano.json")), key=lambda p: int(p.name.split("-")[-1]))
    if args.draws is not None:
        folders = [f for f in folders if int(f.name.split("-")[-1]) in set(args.draws)]
    if not folders:
        raise SystemExit(f"no finished draw (draw-*/nano.json) in {source}")
    for folder in folders:
        crashed = json.loads((folder / "nano.json").read_text(encoding="utf-8")).get("crashed")
        if crashed:
            print(f"skip {folder.name}: the working draw crashed ({crashed.splitlines()[0]}); rerun it first", flush=True)
            continue
        result = frozen_draw(folder, out, variant=args.variant)
        zs = ", ".join(f"{c['stage']} {c['check']} z = {c['figures'].rsplit('z = ', 1)[-1]}" for c in result["checks"])
        print(f"{args.variant} {folder.name}: {'passes (a broken trainer must not)' if result['passed'] else 'fails'}; {zs}",
              flush=True)
    for broken in args.proof:
        for path in sorted(Path(broken).glob("draw-*/nano.json")):
            print("\n".join(proof(path.parent, out / "proof")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
