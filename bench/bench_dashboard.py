"""Benchmark: the dashboard on a training sweep of 12 checkpoints × 500 problems × 16 samples
(96,000 responses), loaded and rendered page by page through Streamlit's test harness.

Builds the sweep once (synthetic Parallel-R1 traces written through :class:`pr1_eval.store.run_store.RunStore`,
structure fields from :func:`pr1_eval.grading.annotate.annotate_structure`; grades are an exact string
match against the gold answer instead of math-verify, because grading is not what is measured),
then measures, each in a fresh child process so its peak memory is its own:

0. ``floor`` — reading every stored response with pyarrow and counting its blocks in Python (in
   this process): the least any load must do;
1. ``no cache`` — today's :func:`analysis.runs.loader.load_runs` parsing every response (``cache=False``):
   the baseline the cache is measured against. Why today's code with the cache off rather than an
   older commit's loader: it measures the same lever, and it cannot rot (an older source stops
   importing as the records evolve);
3. ``cold cache`` — the first load ever (parse + write the sidecar cache);
4. ``warm cache`` — every later load (a dashboard restart, a notebook, ``analyze``);
5. ``dashboard, cold`` — :class:`streamlit.testing.v1.AppTest` on ``dashboards/app.py`` with the
   sidecar cache emptied first: the first page a user opens after a fresh start on new runs
   (load + parse + leaderboard), against the target of 30× the floor;
6. ``dashboard`` — the same with a warm sidecar: the first run (load + leaderboard), then each
   page twice — the first render computes its tables, the second is the cached render a user
   sees afterwards, against the target of 1 s. No embeddings;
7. ``training job`` — a job of ``--job-steps`` step runs (``--job-rollouts`` rollouts each, the
   summary stored in run.json as the writers store it): the Training page's first render and
   its cached render, against the target of 2 s.

Ratios are against the floor and baseline measured in the same invocation. Prints a table;
``--json`` too. ``--small`` (2 × 10 × 4, a 20-step job, in a temporary folder) is the size
``.ci/run`` executes; it fails when a page raises.

    .venv/bin/python bench/bench_dashboard.py [--runs 12] [--problems 500] [--k 16] [--dir DIR] [--small]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PAGES = ("views/leaderboard.py", "views/training.py", "views/behaviour.py", "views/diversity.py",
         "views/trace_viewer.py", "views/compare.py")
_WORDS = ("let", "the", "number", "of", "ways", "be", "n", "so", "we", "count", "each", "case", "then", "sum",
          "over", "all", "pairs", "which", "gives", "since", "modulo", "prime", "factor", "square", "root", "area",
          "triangle", "circle", "radius", "$x^2$", "$\\frac{m}{n}$", "=", "+", "2", "3", "5", "7", "12", "we get",
          "check", "again", "therefore", "hence", "case 2", "by symmetry", "substituting", "this", "is")


def paragraphs(rng: random.Random, count: int = 3000) -> list[str]:
    """A pool of math-flavoured paragraphs (20–220 words) that responses are assembled from."""
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(20, 220))) + "." for _ in range(count)]


def response(rng: random.Random, pool: list[str], answer: int, progress: float, correct: bool) -> str:
    """One trace: main line, 0–4 blocks of 2–3 paths (later checkpoints branch later), final answer."""
    from pr1_eval.protocol import tags as T

    n_blocks = rng.choices([0, 1, 2, 3, 4], weights=[10, 45, 30, 10, 5])[0]
    parts = [" ".join(rng.choice(pool) for _ in range(1 + int(progress * 3)))]
    for _ in range(n_blocks):
        paths = []
        for _ in range(3 if rng.random() < 0.2 else 2):
            ending = f"\nFinal Answer: {answer + (rng.random() < 0.3)}" if rng.random() < 0.6 else ""
            paths.append(f"{T.PATH_OPEN}\n{rng.choice(pool)}{ending}\n{T.PATH_CLOSE}\n")
        parts.append(f"{T.PARALLEL_OPEN}\n{''.join(paths)}{T.PARALLEL_CLOSE}\n{T.SUMMARY_OPEN}\n{rng.choice(pool)[:200]}\n"
                     f"{T.SUMMARY_CLOSE}\n")
        parts.append(rng.choice(pool))
    return "\n\n".join(parts) + f"\n\nFinal Answer: {answer if correct else answer + 1}"


def build(root: Path, n_runs: int, n_problems: int, k: int) -> list[Path]:
    """The sweep under ``root`` (reused when a finished one with these sizes is there)."""
    from pr1_eval.grading import extract_answer
    from pr1_eval.grading.annotate import annotate_structure
    from pr1_eval.records.run import RunRecord
    from pr1_eval.records.sample import SampleRecord
    from pr1_eval.store.run_store import RunStore

    manifest = root / "bench.json"
    wanted = {"runs": n_runs, "problems": n_problems, "k": k, "version": 1}
    runs = [root / f"step{100 * (i + 1):05d}" for i in range(n_runs)]
    if manifest.is_file() and json.loads(manifest.read_text()) == wanted:
        return runs
    rng = random.Random(0)
    pool = paragraphs(rng)
    started = time.perf_counter()
    for i, run in enumerate(runs):
        step, progress = 100 * (i + 1), i / max(n_runs - 1, 1)
        store = RunStore(run)
        info = {"name": run.name, "model": {"path": f"/ck/bench/global_step_{step}/actor", "step": step},
                "decoding": {"mode": "forkjoin"}, "k": k, "tasks": {"math500": {"n_problems": n_problems}},
                "status": "complete"}
        store.write_run(RunRecord.from_dict(info))
        for start in range(0, n_problems, 100):
            chunk = []
            for p in range(start, min(start + 100, n_problems)):
                answer = (p * 7919) % 1000
                for s in range(k):
                    correct = rng.random() < 0.3 + 0.4 * progress
                    record = SampleRecord(task="math500", problem_id=f"test/{p:04d}", sample_idx=s, gold=str(answer),
                                          problem=f"Problem {p}: " + pool[p % len(pool)][:300],
                                          response=response(rng, pool, answer, progress, correct), finish_reason="stop")
                    annotate_structure(record)
                    extracted = extract_answer(record.response)
                    record.extracted_answer, record.answer_source = extracted.text, extracted.source
                    record.correct = record.correct_paper = extracted.text == str(answer)
                    record.grade_status = "ok" if extracted.text else "no_answer"
                    record.answer_class = None if extracted.text is None else int(extracted.text != str(answer))
                    chunk.append(record)
            store.append(chunk)
        print(f"  built {run.name} ({time.perf_counter() - started:.0f} s so far)", file=sys.stderr, flush=True)
    manifest.write_text(json.dumps(wanted))
    return runs


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def floor_seconds(runs: list[Path], repeats: int = 3) -> tuple[float, float]:
    """Wall and CPU seconds to read every stored response with pyarrow and count its blocks: the
    best of ``repeats`` (a shared machine's load inflates single wall times several fold)."""
    times = [_floor_once(runs) for _ in range(repeats)]
    return min(t[0] for t in times), min(t[1] for t in times)


def floor_counts(runs: list[Path]) -> tuple[float, int, int]:
    """One floor pass: its wall seconds, and the responses and ``<Parallel>`` blocks it counted
    (the size a bench reports beside its ratios)."""
    seconds, _, n_responses, n_blocks = _floor_once(runs)
    return seconds, n_responses, n_blocks


def _floor_once(runs: list[Path]) -> tuple[float, float, int, int]:
    import pyarrow.parquet as pq

    started, cpu = time.perf_counter(), time.process_time()
    n_responses = n_blocks = 0
    for run in runs:
        for part in sorted((run / "samples.parquet").glob("part-*.parquet")):
            for text in pq.read_table(part, columns=["response"]).column("response").to_pylist():
                n_responses += 1
                n_blocks += text.count("<Parallel>") if text else 0
    return time.perf_counter() - started, time.process_time() - cpu, n_responses, n_blocks


def child_load(root: str, cache: bool) -> dict[str, Any]:
    from analysis.runs.loader import load_runs

    started, cpu = time.perf_counter(), time.process_time()
    loaded = load_runs([root], tokenizer=None, cache=cache)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    chars = int(loaded.samples["response"].str.len().sum())
    return {"seconds": seconds, "cpu_seconds": cpu, "peak_mb": _peak_mb(), "samples": len(loaded.samples),
            "blocks": len(loaded.blocks), "response_mb": chars / 2**20}


def child_dashboard(root: str) -> dict[str, Any]:
    from streamlit.testing.v1 import AppTest

    sys.argv = ["app.py", root]
    app = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "dashboards" / "app.py"), default_timeout=900)
    started, cpu = time.perf_counter(), time.process_time()
    app.run()
    timings: dict[str, Any] = {"first load (leaderboard)": (time.perf_counter() - started, time.process_time() - cpu)}
    errors = [str(e.value)[:300] for e in app.exception]
    for page in PAGES:
        for attempt in ("first", "cached"):
            started, cpu = time.perf_counter(), time.process_time()
            app.switch_page(page).run()
            timings[f"{page.split('/')[1][:-3]} ({attempt})"] = (time.perf_counter() - started,
                                                                 time.process_time() - cpu)
            errors += [f"{page}: {str(e.value)[:300]}" for e in app.exception]
    return {"timings": timings, "peak_mb": _peak_mb(), "errors": errors, "load_average": os.getloadavg()[0]}


def build_job(root: Path, n_steps: int, n_rollouts: int) -> list[Path]:
    """A training job's step runs under ``root/train`` (reused when one of these sizes is there):
    blocks open later and more often as steps go on; every run.json holds the step's summary."""
    from pr1_eval.grading.annotate import annotate_structure
    from pr1_eval.records.run import RunRecord
    from pr1_eval.records.sample import SampleRecord
    from pr1_eval.report.step_summary import step_summary
    from pr1_eval.store.run_store import RunStore

    manifest = root / "bench.json"
    wanted = {"steps": n_steps, "rollouts": n_rollouts, "version": 1}
    runs = [root / "train" / f"step-{step:06d}" for step in range(n_steps)]
    if manifest.is_file() and json.loads(manifest.read_text()) == wanted:
        return runs
    shutil.rmtree(root, ignore_errors=True)
    rng = random.Random(1)
    pool = paragraphs(rng, 400)
    for step, run in enumerate(runs):
        progress = step / max(n_steps - 1, 1)
        records = []
        for i in range(n_rollouts):
            answer, correct = i % 50, rng.random() < 0.2 + 0.5 * progress
            record = SampleRecord(task="dapo", problem_id=f"q{i // 8:04d}", sample_idx=i % 8, gold=str(answer),
                                  response=response(rng, pool, answer, progress, correct), finish_reason="stop",
                                  correct=correct, reward=float(correct), grade_status="ok")
            annotate_structure(record)
            record.n_response_tokens = len(record.response) // 4
            records.append(record)
        training = {"job": "bench-job", "kind": "train", "step": step, "tags_kept": True,
                    "reward_mode": "parallel_accuracy" if step < n_steps // 2 else "accuracy",
                    "summary": step_summary(records).to_json()}
        store = RunStore(run)
        store.write_run(RunRecord.from_dict({"name": f"bench-job-train-step-{step:06d}", "status": "complete",
                                             "model": {"step": step, "family": "bench-job"}, "k": 8,
                                             "training": training}))
        store.rewrite(records)
    manifest.write_text(json.dumps(wanted))
    return runs


def child_training(root: str) -> dict[str, Any]:
    """The Training page on the job: first render (summaries, sampled diversity), then cached."""
    from streamlit.testing.v1 import AppTest

    sys.argv = ["app.py", root]
    app = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "dashboards" / "app.py"), default_timeout=900)
    timings: dict[str, Any] = {}
    errors: list[str] = []
    for attempt in ("start (leaderboard)", "training (first)", "training (cached)", "training (cached, again)"):
        started, cpu = time.perf_counter(), time.process_time()
        if attempt.startswith("start"):
            app.run()
        else:
            app.switch_page("views/training.py").run()
        timings[attempt] = (time.perf_counter() - started, time.process_time() - cpu)
        errors += [f"{attempt}: {str(e.value)[:300]}" for e in app.exception]
    return {"timings": timings, "peak_mb": _peak_mb(), "errors": errors}


def run_child(kind: str, root: Path, env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", kind, "--dir", str(root)], env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"child {kind} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--problems", type=int, default=500)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--dir", default="/tmp/pr1-bench-dashboard", help="where the sweep and the caches live")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--job-steps", type=int, default=300, help="steps of the training job (Training page)")
    parser.add_argument("--job-rollouts", type=int, default=200,
                        help="rollouts per step of the training job (300 × 200 is over the dashboard's full-load limit, "
                             "as a real job is: the Training page reads the summaries)")
    parser.add_argument("--small", action="store_true", help="2 × 10 × 4 and a 20-step job in a temporary folder (CI)")
    parser.add_argument("--child", choices=["load-baseline", "load-cache", "dashboard", "training"],
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sweep = str(Path(args.dir) / "sweep")
        result = (child_load(sweep, cache=False) if args.child == "load-baseline" else
                  child_load(sweep, cache=True) if args.child == "load-cache" else
                  child_training(str(Path(args.dir) / "job")) if args.child == "training" else child_dashboard(sweep))
        print(json.dumps(result))
        return
    if args.small:
        args.runs, args.problems, args.k, args.dir = 2, 10, 4, tempfile.mkdtemp(prefix="pr1-bench-dashboard-")
        args.job_steps, args.job_rollouts = 20, 8
    try:
        failed = measure(args)
    finally:
        if args.small:
            shutil.rmtree(args.dir, ignore_errors=True)
    if failed:
        raise SystemExit("bench_dashboard: a page raised (see ERROR above)")


def measure(args: argparse.Namespace) -> bool:
    """Build, measure, report; whether a dashboard page raised."""
    root = Path(args.dir)
    started = time.perf_counter()
    runs = build(root / "sweep", args.runs, args.problems, args.k)
    print(f"sweep: {len(runs)} runs × {args.problems} problems × {args.k} samples ready "
          f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    cache = root / "loader-cache"
    for stale in cache.glob("*.parquet") if cache.is_dir() else []:
        stale.unlink()
    env = {**os.environ, "PR1_LOADER_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    build_job(root / "job", args.job_steps, args.job_rollouts)
    floor, floor_cpu = floor_seconds(runs)
    results = {"floor": {"seconds": floor, "cpu_seconds": floor_cpu}, "baseline": run_child("load-baseline", root, env),
               "cold": run_child("load-cache", root, env),
               "warm": run_child("load-cache", root, env)}
    for stale in cache.glob("*.parquet"):
        stale.unlink()
    results["dashboard_cold"] = run_child("dashboard", root, env)
    results["dashboard"] = run_child("dashboard", root, env)
    results["training"] = run_child("training", root, env)
    report(results, args)
    return any(results[key]["errors"] for key in ("dashboard_cold", "dashboard", "training"))


def report(results: dict[str, Any], args: argparse.Namespace) -> None:
    base = results["baseline"]
    n, floor = base["samples"], results["floor"]["seconds"]
    print(f"\n{n} responses ({base['response_mb']:.0f} MB of response text), {base['blocks']} blocks; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall time includes waiting for them, "
          "CPU time is this process's own)")
    print(f"{'load':<38}{'wall s':>8}{'CPU s':>8}{'CPU ms/resp':>12}{'× baseline (CPU)':>18}{'× floor':>9}"
          f"{'peak MB':>9}")
    print(f"{'floor: pyarrow read + count blocks':<38}{floor:>8.2f}{'':>8}{'':>12}{'':>18}{1:>9.1f}")
    for name, key in (("baseline, no cache: parse every resp.", "baseline"),
                      ("sidecar cache, cold (parse + write)", "cold"), ("sidecar cache, warm", "warm")):
        r = results[key]
        print(f"{name:<38}{r['seconds']:>8.1f}{r['cpu_seconds']:>8.1f}{1000 * r['cpu_seconds'] / n:>12.3f}"
              f"{base['cpu_seconds'] / r['cpu_seconds']:>18.2f}{r['seconds'] / floor:>9.1f}{r['peak_mb']:>9.0f}")
    cold_wall, cold_cpu = results["dashboard_cold"]["timings"]["first load (leaderboard)"]
    floor_cpu = results["floor"]["cpu_seconds"]
    print(f"\nfloor (best of 3): {floor:.2f} s wall, {floor_cpu:.2f} s CPU")
    print(f"first page, cold caches (fresh server, empty sidecar): {cold_wall:.2f} s wall = {cold_wall / floor:.1f}× "
          f"the floor's wall, {cold_cpu:.2f} s CPU = {cold_cpu / floor_cpu:.1f}× its CPU (target ≤ 30×: "
          f"{'met' if max(cold_wall / floor, cold_cpu / floor_cpu) <= 30 else 'NOT met'})")
    dash = results["dashboard"]
    print(f"\n{'dashboard (AppTest, warm sidecar)':<38}{'wall s':>8}{'CPU s':>8}")
    for name, (seconds, cpu) in dash["timings"].items():
        target = "" if "cached" not in name else f"  target < 1 s: {'met' if seconds < 1 else 'NOT met'}"
        print(f"{name:<38}{seconds:>8.2f}{cpu:>8.2f}  ({seconds / floor:.1f}× floor){target}")
    slowest = max((t for n, t in dash["timings"].items() if "cached" in n), key=lambda t: t[0])
    print(f"slowest cached page: {slowest[0]:.2f} s wall ({slowest[1]:.2f} s CPU)")
    print(f"peak memory of the dashboard process: {dash['peak_mb']:.0f} MB (load average then {dash['load_average']:.1f})")
    job = results["training"]
    print(f"\n{'training job: ' + str(args.job_steps) + ' steps × ' + str(args.job_rollouts) + ' rollouts':<38}"
          f"{'wall s':>8}{'CPU s':>8}")
    for name, (seconds, cpu) in job["timings"].items():
        target = "" if "cached" not in name else f"  target < 2 s: {'met' if seconds < 2 else 'NOT met'}"
        print(f"{name:<38}{seconds:>8.2f}{cpu:>8.2f}{target}")
    print(f"peak memory of the training-page process: {job['peak_mb']:.0f} MB")
    for error in results["dashboard_cold"]["errors"] + dash["errors"] + job["errors"]:
        print(f"ERROR {error}")
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
