"""Benchmark: ``pr1-eval analyze --no-embeddings`` on a training sweep, against the floor.

Builds a synthetic sweep (``--runs`` checkpoints × ``--problems`` problems × ``--k`` samples;
default 12 × 500 × 16 = 96,000 responses, the traces of :mod:`bench_dashboard`), then, in one
invocation so the ratios share the machine's load:

1. ``floor`` — read every stored response with pyarrow and count its ``<Parallel>`` blocks in
   Python (in this process): the least any analysis of the responses must do;
2. ``cold`` — ``pr1-eval analyze RUNS --no-embeddings --json`` in a child process with empty
   loader and analysis caches (a first run);
3. ``warm`` — the same command again (every cache filled by the cold run);
4. ``leaderboard`` — ``pr1-eval leaderboard RUNS --json``, with an empty loader cache (a first
   look at a sweep) and with the one the analyses filled.

Each child's wall time and peak RSS (``os.wait4`` in a small launcher, as ``/usr/bin/time``
reports it) are printed
with the ratio to the floor; the cold and warm ``--json`` documents must be identical (the caches
change no number), else the bench fails. ``--small`` is the size ``.ci/run`` executes.

The project's modules are byte-compiled first (into their ``__pycache__``, which git ignores), so
each child imports them as an installed package does (numba's cache of the compiled kernels is filled
then too: a first analysis after installing compiles it once, a few seconds); where
``PYTHONDONTWRITEBYTECODE`` is set (this team's machine sets it), every child otherwise compiled
some 110 modules from source, about a quarter of a CPU second that no user pays. ``--from-source`` measures the old way.

    .venv/bin/python bench/bench_analyze.py [--runs 12] [--problems 500] [--k 16] [--dir DIR] [--small]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_dashboard import build, floor_counts  # noqa: E402


def compile_project() -> None:
    """Byte-compile the project's packages in place (see the module docstring for why), and fill
    numba's cache of the BLEU kernels (:mod:`analysis.diversity.bleu_kernel`,
    :mod:`analysis.diversity.token_kernel`) and of the CSV's (:mod:`analysis.engine.json_fields`): each
    compiled once per installation, a few seconds, then loaded from ``__pycache__``."""
    import compileall

    import numpy as np

    for package in ("pr1_eval", "analysis"):
        compileall.compile_dir(HERE.parent / package, quiet=2)
    from analysis.diversity.bleu_counts import clipped_matches  # the kernel where it loads, else the arrays

    one = np.ones(1, dtype=np.int64)
    clipped_matches(one, one, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), 2)
    from analysis.diversity.bleu_counts import TokenIds  # the raw tokens' kernel, likewise

    TokenIds(str, str.split).encode(["a b"])
    import pyarrow as pa

    from analysis.engine.text_lists import csv_fields  # the CSV's kernel for lists of strings, likewise

    csv_fields(pa.array([["x"]], type=pa.large_list(pa.large_string())))


def run_analyze(root: Path, env: dict[str, str]) -> dict[str, Any]:
    """One ``analyze --no-embeddings --json`` child: wall seconds, peak RSS (MB), its document."""
    with tempfile.TemporaryDirectory() as out:
        return run_child(["analyze", str(root), "--no-embeddings", "--json", "--out", out], env)


#: Runs ``argv[2:]`` and writes its wall seconds, CPU seconds and peak RSS (KB) to ``argv[1]``. Why a
#: launcher: Linux reports a child's peak RSS as at least its parent's RSS at the fork, and this
#: bench holds every response after the floor; a child of this small process is measured alone.
LAUNCHER = """import json, os, subprocess, sys, time
started = time.perf_counter()
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
json.dump({"seconds": time.perf_counter() - started, "cpu_seconds": usage.ru_utime + usage.ru_stime,
           "peak_kb": usage.ru_maxrss, "code": os.waitstatus_to_exitcode(status)}, open(sys.argv[1], "w"))
"""


def run_child(arguments: list[str], env: dict[str, str]) -> dict[str, Any]:
    """One ``pr1-eval ARGUMENTS`` child: wall and CPU seconds, peak RSS (MB), its ``--json`` document."""
    code = "import sys; from pr1_eval.cli.main import entry; entry(sys.argv[1:])"  # what the pr1-eval program runs
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr, \
            tempfile.NamedTemporaryFile(suffix=".json") as measured:
        command = [sys.executable, "-c", LAUNCHER, measured.name, sys.executable, "-c", code, *arguments]
        subprocess.run(command, env=env, stdout=stdout, stderr=stderr, check=False)
        result = json.loads(Path(measured.name).read_text() or "{}")
        stdout.seek(0)
        stderr.seek(0)
        text, errors = stdout.read().decode(), stderr.read().decode()
    if result.get("code") != 0:
        raise SystemExit(f"bench_analyze: {arguments[0]} exited {result.get('code')}:\n{errors[-3000:]}")
    return {"seconds": result["seconds"], "cpu_seconds": result["cpu_seconds"], "peak_mb": result["peak_kb"] / 1024,
            "document": json.loads(text)}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--problems", type=int, default=500)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--dir", default="/tmp/pr1-bench-analyze", help="where the sweep lives (reused)")
    parser.add_argument("--small", action="store_true", help="2 × 10 × 4, in a temporary folder (CI)")
    parser.add_argument("--from-source", action="store_true",
                        help="do not byte-compile the project first (children may compile every module from source)")
    parser.add_argument("--leaderboard-only", action="store_true",
                        help="the floor and the two leaderboard runs only (no analyze): minutes less on a full sweep")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="pr1-bench-analyze-") if args.small else None
    root = Path(scratch or args.dir)
    if args.small:
        args.runs, args.problems, args.k = 2, 10, 4
    try:
        started = time.perf_counter()
        runs = build(root / "sweep", args.runs, args.problems, args.k)
        print(f"sweep: {args.runs} × {args.problems} × {args.k} ready ({time.perf_counter() - started:.0f} s)",
              file=sys.stderr)
        if not args.from_source:
            compile_project()
        print("project modules: " + ("compiled from source by each child (--from-source)" if args.from_source
                                     else "byte-compiled before the children run"), file=sys.stderr)
        caches = root / "caches"
        shutil.rmtree(caches, ignore_errors=True)
        env = {**os.environ, "PR1_LOADER_CACHE": str(caches / "loader"), "PR1_ANALYSIS_CACHE": str(caches / "analysis"),
               "HF_HUB_OFFLINE": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))}
        cpu = time.process_time()
        floor, n_responses, n_blocks = floor_counts(runs)
        floor_cpu = time.process_time() - cpu
        board_cold = run_child(["leaderboard", str(root / "sweep"), "--json"],
                               {**env, "PR1_LOADER_CACHE": str(caches / "leaderboard-loader")})
        analyses = {}
        if not args.leaderboard_only:
            analyses = {"analyze --no-embeddings, cold caches": run_analyze(root / "sweep", env),
                        "analyze --no-embeddings, warm caches": run_analyze(root / "sweep", env)}
        warm_env = {**env, "PR1_LOADER_CACHE": str(caches / "leaderboard-loader")} if args.leaderboard_only else env
        board_warm = run_child(["leaderboard", str(root / "sweep"), "--json"], warm_env)  # the cache a run filled
        floor_again, _, _ = floor_counts(runs)
        report(floor, floor_again, floor_cpu, n_responses, n_blocks,
               {**analyses, "leaderboard --json, cold loader cache": board_cold,
                "leaderboard --json, warm loader cache": board_warm})
        if board_cold["document"] != board_warm["document"]:
            raise SystemExit("bench_analyze: the leaderboard differs with a warm loader cache")
        cold, warm = analyses.get("analyze --no-embeddings, cold caches"), analyses.get("analyze --no-embeddings, warm caches")
        if cold and warm and cold["document"] != warm["document"]:
            raise SystemExit("bench_analyze: the warm run's numbers differ from the cold run's")
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


def report(floor: float, floor_again: float, floor_cpu: float, n_responses: int, n_blocks: int,
           results: dict[str, dict[str, Any]]) -> None:
    """The table: seconds, × floor, peak memory; CPU seconds too (the child's and its grading
    workers'), the steadier figure on a shared machine."""
    base = min(floor, floor_again)
    print(f"\n{n_responses} responses, {n_blocks} blocks; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs; floor measured before and after the analyses: {floor:.2f} s, {floor_again:.2f} s")
    print(f"{'what':<44}{'wall s':>9}{'× floor':>9}{'CPU s':>9}{'× floor CPU':>12}{'peak MB':>9}")
    print(f"{'floor: pyarrow read + count blocks':<44}{base:>9.2f}{1:>9.1f}{floor_cpu:>9.2f}{1:>12.1f}{'':>9}")
    for name, r in results.items():
        print(f"{name:<44}{r['seconds']:>9.2f}{r['seconds'] / base:>9.1f}{r['cpu_seconds']:>9.2f}"
              f"{r['cpu_seconds'] / floor_cpu:>12.1f}{r['peak_mb']:>9.0f}")
    board = results["leaderboard --json, cold loader cache"]
    summary = {"responses": n_responses, "floor_s": round(base, 3), "floor_cpu_s": round(floor_cpu, 3),
               "leaderboard_s": round(board["seconds"], 2), "leaderboard_x_floor": round(board["seconds"] / base, 1),
               "leaderboard_cpu_x_floor": round(board["cpu_seconds"] / floor_cpu, 1),
               "leaderboard_peak_mb": round(board["peak_mb"])}
    if "analyze --no-embeddings, cold caches" in results:
        cold, warm = results["analyze --no-embeddings, cold caches"], results["analyze --no-embeddings, warm caches"]
        print("cold and warm documents identical:", cold["document"] == warm["document"])
        summary |= {"cold_s": round(cold["seconds"], 2), "warm_s": round(warm["seconds"], 2),
                    "cold_x_floor": round(cold["seconds"] / base, 1), "warm_x_floor": round(warm["seconds"] / base, 1),
                    "cold_cpu_s": round(cold["cpu_seconds"], 2), "warm_cpu_s": round(warm["cpu_seconds"], 2),
                    "cold_peak_mb": round(cold["peak_mb"]), "warm_peak_mb": round(warm["peak_mb"])}
    print(json.dumps(summary))


if __name__ == "__main__":
    raise SystemExit(main())
