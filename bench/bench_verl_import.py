"""Benchmark: ``import-verl`` on a synthetic training job, streaming, against a floor measured in the
same invocation.

The job: ``--steps`` steps × ``--rows`` rollouts (512 prompts × 8 at full size: 300 × 4,096 = 1.2
million responses), written in both dump formats: VERL 0.9.1's V1 writer itself
(``PPOTrainer._write_generations``, the function its ``_dump_generations`` submits to the dump
thread) and the Parallel-R1 fork's layout (``tests/support/verl_dump_fixtures.fork_dump_generations``,
byte-identical to its ``_dump_generations``: left pads before each chat-templated prompt, eos and
right pads up to ``--response-tokens`` after each response). Responses are synthetic Parallel-R1
traces (0–3 blocks); text, not tokens, since no tokenizer is needed to measure reading.

Measured, each in a fresh child process so its peak memory is its own (``VmHWM`` read by the child,
and ``/usr/bin/time -v``'s maximum resident set size when that program exists):

1. ``floor`` — read every file line by line with the same JSON parser (``json.loads``) and count
   ``<Parallel>`` in each output: the least any importer must do;
2. ``import`` — :func:`pr1_eval.ingest.verl_import.import_verl` with ``grade=False`` (the job's own
   score/acc kept; math-verify grading is a separate, per-answer cost measured by
   ``bench/bench_grading.py``), every step written as a run; then a rerun, which must skip all.

The floor runs before and after the import (the file cache warms and cools with the machine's
load); the ratio is to the faster of the two, the least favourable to the import.

Prints one table per format with seconds, rows/s, peak RSS and the ratio to the floor, and the
linear extrapolation to 300 steps × 4,096 rows (import reads one step at a time: time grows with
the rows, peak memory with the rows of one step).

Measured at 20 steps × 4,096 rows on a shared 2-core machine (``--steps 20 --rows 4096``, beside
a CI run): the fork's dumps (4.33 GB, 52.8 KB/row) import in 40.7 s against a floor of 12.0 s
(3.4×), VERL 0.9.1's (0.38 GB, 4.6 KB/row) in 10.2 s against 2.0 s (5.2×); peak RSS 225 and
234 MB (one step is held at a time). Linearly, 300 steps: about 10 min (fork) and 3 min (V1).

    .venv/bin/python bench/bench_verl_import.py [--steps 4] [--rows 1024] [--response-tokens 3000] [--dir DIR]
    .venv/bin/python bench/bench_verl_import.py --steps 300 --rows 4096   # the full job: ~14 GB + ~55 GB
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
FULL_ROWS = 300 * 4096  # a real job: 300 steps x 512 prompts x 8 rollouts
_WORDS = ("let", "the", "number", "of", "ways", "be", "n", "so", "we", "count", "each", "case", "then", "sum",
          "over", "pairs", "which", "gives", "$x^2$", "$\\frac{m}{n}$", "=", "+", "2", "3", "5", "7", "12")


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def trace(rng: random.Random, answer: int) -> tuple[str, int]:
    """A tagged response and its length in words (the synthetic token count)."""
    parts = [_words(rng, rng.randint(60, 400))]
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        paths = "".join(f"<Path>{_words(rng, rng.randint(40, 200))}</Path>" for _ in range(2))
        parts.append(f"<Parallel>{paths}</Parallel><Summary>{_words(rng, 30)}</Summary>{_words(rng, 80)}")
    text = " ".join(parts) + f"\nFinal Answer: {answer}"
    return text, len(text.split())


def write_job(folder: Path, fmt: str, steps: int, rows: int, response_tokens: int, seed: int = 0) -> int:
    """Write ``steps`` dump files of ``rows`` rows in ``fmt`` ('fork' or 'v1'); returns bytes written."""
    template = (ROOT / "pr1_eval" / "data" / "prompts" / "parallel_r1_v3.txt").read_text(encoding="utf-8")
    rng = random.Random(seed)
    n_prompts = max(1, rows // 8)
    for step in range(1, steps + 1):
        problems = [f"Problem {step}-{p}: {_words(rng, 40)}" for p in range(n_prompts)]
        inputs, outputs, scores, accs, uids, gts = [], [], [], [], [], []
        uid = [f"{rng.getrandbits(128):032x}" for _ in problems]
        for i in range(rows):
            p = i % n_prompts
            text, n_tok = trace(rng, p)
            prompt = template.replace("{problem}", problems[p])
            if fmt == "fork":
                inputs.append(PAD * max(0, 1730 - len(prompt) // 4) + f"{IM_START}user\n{prompt}{IM_END}\n"
                              f"{IM_START}assistant\n")
                cut = n_tok >= response_tokens
                outputs.append(text + ("" if cut else IM_END + PAD * (response_tokens - n_tok - 1)))
            else:
                inputs.append(f"user\n{prompt}\nassistant\n")
                outputs.append(text)
            scores.append(1.0 if i % 3 else -1.0)
            accs.append(bool(i % 3))
            uids.append(f"{uid[p]}_{i // n_prompts}_0")
            gts.append(str(p))
        if fmt == "fork":
            from tests.support.verl_dump_fixtures import fork_dump_generations

            fork_dump_generations(inputs, outputs, scores, {"score": scores, "acc": accs, "pred": gts}, str(folder),
                                  step)
        else:
            from verl.trainer.ppo.v1.trainer_base import PPOTrainer

            PPOTrainer._write_generations(inputs, outputs, gts, scores, {"uid": uids}, str(folder), step)
    return sum(f.stat().st_size for f in folder.glob("*.jsonl"))


def floor(folder: str) -> dict[str, Any]:
    rows = blocks = 0
    for path in sorted(Path(folder).glob("*.jsonl")):
        with path.open("rb") as handle:
            for line in handle:
                blocks += json.loads(line)["output"].count("<Parallel>")
                rows += 1
    return {"rows": rows, "blocks": blocks}


def do_import(folder: str, out: str, response_tokens: str) -> dict[str, Any]:
    from pr1_eval.ingest.verl_formats import Lengths
    from pr1_eval.ingest.verl_import import ImportOptions, import_verl

    opts = ImportOptions(final=True, grade=False, benchmarks=False, lengths=Lengths(2000, int(response_tokens)))
    results = import_verl(folder, out, opts)
    from pr1_eval.store.run_store import RunStore

    trainings = [RunStore(r.run).read_run().training for r in results if r.run]
    summaries = sum(1 for t in trainings if t is not None and t.summary is not None)
    return {"rows": sum(r.rows for r in results), "statuses": sorted({r.status for r in results}),
            "steps": len(results), "summaries": summaries}


def peak_rss_mb() -> float:
    """This process's peak resident memory (``VmHWM``: reset at exec, unlike ``ru_maxrss``, which a
    child started from a large parent inherits)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(what: str, *args: str) -> dict[str, Any]:
    """Run ``what`` in a fresh interpreter; its seconds (after its imports) and peak RSS come back."""
    here = str(Path(__file__).resolve().parent)
    code = (f"import json, sys, time; sys.path.insert(0, {here!r}); import bench_verl_import as b; "
            "sys.argv[1] == 'do_import' and __import__('pr1_eval.ingest.verl_import'); "
            "t = time.perf_counter(); r = getattr(b, sys.argv[1])(*sys.argv[2:]); "
            "r['seconds'] = time.perf_counter() - t; r['peak_mb'] = b.peak_rss_mb(); print(json.dumps(r))"
            )
    timer = ["/usr/bin/time", "-v"] if Path("/usr/bin/time").is_file() else []
    done = subprocess.run([*timer, sys.executable, "-c", code, what, *args], capture_output=True, text=True,
                          check=False)
    if done.returncode:
        raise SystemExit(f"{what} failed:\n{done.stderr[-3000:]}")
    result = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    result["time_v_mb"] = _time_v_peak_mb(done.stderr)
    return result


def _time_v_peak_mb(stderr: str) -> float:
    """``Maximum resident set size`` from ``/usr/bin/time -v`` (nan when it did not run)."""
    for line in stderr.splitlines():
        if "Maximum resident set size" in line:
            return int(line.rsplit(":", 1)[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rows", type=int, default=1024, help="rollouts per step (full size: 4096)")
    parser.add_argument("--response-tokens", type=int, default=3000)
    parser.add_argument("--formats", default="fork,v1")
    parser.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--reuse", action="store_true", help="keep the dumps already in --dir (same size): time "
                        "only the reading")
    args = parser.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="bench-verl-"))
    print(f"job: {args.steps} steps x {args.rows} rows, responses padded to {args.response_tokens}; in {base}")
    for fmt in args.formats.split(","):
        folder = base / fmt / "rollout-log"
        t = time.perf_counter()
        reuse = args.reuse and len(list(folder.glob("*.jsonl"))) == args.steps
        size = (sum(f.stat().st_size for f in folder.glob("*.jsonl")) if reuse
                else write_job(folder, fmt, args.steps, args.rows, args.response_tokens))
        shutil.rmtree(base / fmt / "runs", ignore_errors=True)
        how = "reused" if reuse else f"written in {time.perf_counter() - t:.0f} s"
        print(f"\n[{fmt}] {size / 1e9:.2f} GB ({size / (args.steps * args.rows) / 1e3:.1f} KB/row), {how}")
        before = child("floor", str(folder))
        out = base / fmt / "runs"
        first = child("do_import", str(folder), str(out), str(args.response_tokens))
        after = child("floor", str(folder))  # the floor again: the faster of the two is the one compared
        lo = min(before, after, key=lambda r: r["seconds"])
        rerun = child("do_import", str(folder), str(out), str(args.response_tokens))
        assert first["rows"] == lo["rows"] and rerun["statuses"] == ["unchanged"], (first, rerun)
        assert first["summaries"] == first["steps"] == args.steps, first  # every step's run holds its summary
        print(f"{'':<10}{'seconds':>9}{'rows/s':>10}{'peak MB':>9}{'time -v MB':>11}{'x floor':>9}")
        for name, r in (("floor", before), ("import", first), ("floor", after), ("rerun", rerun)):
            rate = lo["rows"] / r["seconds"] if r["seconds"] else 0.0
            print(f"{name:<10}{r['seconds']:>9.1f}{rate:>10.0f}{r['peak_mb']:>9.0f}{r['time_v_mb']:>11.0f}"
                  f"{r['seconds'] / lo['seconds']:>9.2f}")
        scale = FULL_ROWS / lo["rows"]
        print(f"at 300 x 4,096 rows (x{scale:.1f}, linear: one step is read at a time, so peak memory does not grow "
              f"with the steps): floor {lo['seconds'] * scale / 60:.0f} min, import {first['seconds'] * scale / 60:.0f} "
              f"min, {size * scale / 1e9:.0f} GB of dumps")


if __name__ == "__main__":
    main()
