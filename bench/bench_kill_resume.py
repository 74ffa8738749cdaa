"""Reliability bench: SIGKILL a running ``pr1-eval run`` many times, let it finish, compare.

Why: the run store promises that a killed run loses at most the chunk in flight and never
leaves a corrupt or duplicated row, and that a resumed run equals an uninterrupted one. This
checks the promise the hard way. Baseline: the same command run once without interruption, in
this process's session. Then the same command is started again and again into a second folder
and killed with SIGKILL at a random moment each time (``--kills``, default 20), optionally with
the last stored part cut short on disk after some kills (``--cut-parts``: what a machine crash
on a file system that reorders writes, or a full disk, leaves); then it runs to completion.

After every kill it checks that no stored sample disappeared, no key is stored twice (reading
every part by itself, not through the store), and that the grading workers of the killed run
exited. At the end: zero lost, zero duplicated, and every sample equal to the baseline's
(response, verdicts, token count). It prints one table and exits 1 when any check fails.

    .venv/bin/python bench/bench_kill_resume.py                       # 20 kills, random tiny model
    .venv/bin/python bench/bench_kill_resume.py --kills 5 --cut-parts 1 --seed 3

``tests/pr1_eval/generate/test_kill_resume.py`` runs a short version (2 kills, 1 part cut short) in CI.

Figures (``--kills 20 --cut-parts 2 --seed 0``, aime24+gsm8k × 12 problems × k=4, the random
tiny model, a 2-core machine shared with other jobs, load average ≈ 10): 20 SIGKILLs landed, 6 of
them during start-up and 14 while evaluating; 2 parts cut short on disk, both set aside on
resume; 96 of 96 samples at the end, 0 lost, 0 duplicated, 0 different from the uninterrupted
run, 0 orphaned grading workers; wall 904.5 s killed-and-finished against 250.2 s uninterrupted
(3.62×: 21 start-ups instead of one).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

KEY = ("task", "problem_id", "sample_idx")
STARTUP_SHARE = 0.25
COMPARED = ("response", "correct", "correct_paper", "grade_status", "extracted_answer", "n_response_tokens")


@dataclass(frozen=True)
class Workload:
    """The evaluation killed and resumed: small enough for a CPU, many chunks to land in."""

    model: Path
    tasks: str = "aime24,gsm8k"
    k: int = 4
    limit: int = 12
    max_new_tokens: int = 24
    problems_per_chunk: int = 1
    seed: int = 11

    @property
    def expected_samples(self) -> int:
        return len(self.tasks.split(",")) * self.limit * self.k

    def command(self, out: Path) -> list[str]:
        return [sys.executable, "-m", "pr1_eval.cli.main", "run", "--model", str(self.model), "--tasks", self.tasks,
                "-k", str(self.k), "--limit", str(self.limit), "--max-new-tokens", str(self.max_new_tokens),
                "--engine", "hf", "--out", str(out), "--seed", str(self.seed), "--problems-per-chunk",
                str(self.problems_per_chunk), "--grade-workers", "1"]


@dataclass
class KillEvent:
    mode: str  # "startup" (before anything new is stored) or "evaluating" (after a first new part)
    at_s: float  # seconds after the start when the kill landed
    finished_first: bool  # the run ended before the kill landed
    stored_before: int  # samples stored before this start
    stored_after: int  # samples stored after the kill
    parts_after: int
    orphans: int  # child processes of the killed run still alive 5 s later
    cut_part: str | None = None  # part cut short on disk after this kill


@dataclass
class Figures:
    kills: int = 0
    kills_before_first_new_part: int = 0
    cut_parts: int = 0
    parts_set_aside: int = 0
    expected_samples: int = 0
    final_samples: int = 0
    lost: int = 0  # stored samples that a kill made disappear (parts cut on purpose are not counted)
    duplicated: int = 0
    missing_at_end: int = 0
    differing_from_baseline: int = 0
    orphans: int = 0
    baseline_wall_s: float = 0.0
    killed_total_wall_s: float = 0.0
    events: list[KillEvent] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (self.lost == self.duplicated == self.missing_at_end == self.differing_from_baseline == self.orphans == 0
                and self.final_samples == self.expected_samples)


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}


def stored_keys(run: Path) -> tuple[int, set[tuple[str, str, int]]]:
    """(rows, distinct keys) over every readable part, each read on its own."""
    rows, keys = 0, set[tuple[str, str, int]]()
    for part in sorted((run / "samples.parquet").glob("part-*.parquet")):
        try:
            table = pq.read_table(part, columns=list(KEY)).to_pydict()
        except Exception:  # a part cut short on purpose: the resumed run sets it aside
            continue
        rows += len(table["task"])
        keys.update(zip(table["task"], table["problem_id"], table["sample_idx"], strict=True))
    return rows, keys


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux /proc), e.g. the run's grading workers."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):  # the thread or process is already gone
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _reap_orphans(children: list[int], grace_s: float = 5.0) -> int:
    """Wait for a killed run's workers to exit on their own; kill and count those that did not."""
    deadline = time.time() + grace_s
    while time.time() < deadline and any(_alive(c) for c in children):
        time.sleep(0.1)
    survivors = [c for c in children if _alive(c)]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    return len(survivors)


def run_to_completion(workload: Workload, out: Path, timeout_s: float = 900) -> float:
    started = time.perf_counter()
    done = subprocess.run(workload.command(out), env=_env(), capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"run into {out} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def baseline_timing(workload: Workload, out: Path, timeout_s: float = 900) -> tuple[float, float]:
    """Run the baseline; returns (seconds until its first part appeared, whole wall time)."""
    started = time.perf_counter()
    proc = subprocess.Popen(workload.command(out), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    startup = None
    while proc.poll() is None and time.perf_counter() - started < timeout_s:
        if startup is None and _parts(out):
            startup = time.perf_counter() - started
        time.sleep(0.01)
    _, err = proc.communicate()
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"baseline run failed ({proc.returncode}):\n{err[-3000:]}")
    return (startup if startup is not None else wall), wall


def cut_last_part(run: Path) -> str | None:
    """Cut the newest part to half its size, as a crash while writing would leave it."""
    parts = sorted((run / "samples.parquet").glob("part-*.parquet"))
    if not parts:
        return None
    size = parts[-1].stat().st_size
    with open(parts[-1], "r+b") as handle:
        handle.truncate(size // 2)
    return parts[-1].name


def _parts(run: Path) -> int:
    return len(list((run / "samples.parquet").glob("part-*.parquet")))


def kill_once(workload: Workload, out: Path, moment: tuple[str, float]) -> KillEvent:
    """Start the run and SIGKILL it: ``("startup", s)`` s seconds after the start, or
    ``("evaluating", s)`` s seconds after it stored its first new part (mid-generation,
    mid-grading or mid-write of a later chunk)."""
    mode, delay_s = moment
    before, _ = stored_keys(out)
    parts_before = _parts(out)
    proc = subprocess.Popen(workload.command(out), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = time.perf_counter()
    children: set[int] = set()
    kill_at = started + delay_s if mode == "startup" else None
    while proc.poll() is None and (kill_at is None or time.perf_counter() < kill_at):
        children.update(_children(proc.pid))
        if kill_at is None and _parts(out) > parts_before:
            kill_at = time.perf_counter() + delay_s
        time.sleep(0.01)
    finished = proc.poll() is not None
    if not finished:
        children.update(_children(proc.pid))
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    orphans = _reap_orphans(sorted(children))
    after, _ = stored_keys(out)
    return KillEvent(mode, round(time.perf_counter() - started, 2), finished, before, after, _parts(out), orphans)


def compare_with_baseline(run: Path, baseline: Path) -> tuple[int, int]:
    """(samples missing from ``run``, samples whose compared fields differ from the baseline)."""
    import pandas as pd

    from pr1_eval.store.run_store import RunStore

    got = RunStore(run).read_frame().set_index(list(KEY))
    want = RunStore(baseline).read_frame().set_index(list(KEY))
    missing = len(want.index.difference(got.index))
    common = want.index.intersection(got.index)
    a, b = got.loc[common, list(COMPARED)], want.loc[common, list(COMPARED)]
    differing = int((~((a == b) | (pd.isna(a) & pd.isna(b)))).any(axis=1).sum())
    return missing, differing


def bench(workload: Workload, root: Path, kills: int, cut_parts: int, rng: random.Random) -> Figures:
    figures = Figures(expected_samples=workload.expected_samples)
    baseline, killed = root / "baseline", root / "killed"
    startup, figures.baseline_wall_s = baseline_timing(workload, baseline)
    chunk_s = max(figures.baseline_wall_s - startup, 0.5) / max(_parts(baseline), 1)
    cut_after = set(rng.sample(range(kills), min(cut_parts, kills)))
    started = time.perf_counter()
    for i in range(kills):
        # A quarter of the kills land during start-up (run.json, resume scan, model load); the rest
        # at a random moment after the run stored something new, within about one chunk's time.
        moment = (("startup", rng.uniform(0.2, 1.0) * startup) if rng.random() < STARTUP_SHARE
                  else ("evaluating", rng.uniform(0.0, 1.5 * chunk_s)))
        event = kill_once(workload, killed, moment)
        figures.events.append(event)
        if event.finished_first:
            break
        figures.kills += 1
        figures.kills_before_first_new_part += event.stored_after == event.stored_before
        figures.lost += max(event.stored_before - event.stored_after, 0)
        if i in cut_after:
            event.cut_part = cut_last_part(killed)
            figures.cut_parts += event.cut_part is not None
    run_to_completion(workload, killed)
    figures.killed_total_wall_s = time.perf_counter() - started
    rows, keys = stored_keys(killed)
    figures.duplicated = rows - len(keys)
    figures.final_samples = len(keys)
    figures.parts_set_aside = len(list((killed / "samples.parquet").glob("part-*.parquet.corrupt-*")))
    figures.missing_at_end, figures.differing_from_baseline = compare_with_baseline(killed, baseline)
    figures.orphans = sum(e.orphans for e in figures.events)
    return figures


def print_figures(figures: Figures, workload: Workload) -> None:
    ratio = figures.killed_total_wall_s / figures.baseline_wall_s if figures.baseline_wall_s else float("nan")
    print(f"workload: {workload.tasks} × {workload.limit} problems × k={workload.k}, {workload.max_new_tokens} new tokens, "
          f"{workload.problems_per_chunk} problem(s) per chunk, random tiny model")
    print(f"{'kill':>4}  {'during':>10}  {'at s':>6}  {'stored before':>13}  {'stored after':>12}  {'parts':>5}  "
          f"{'orphans':>7}  cut part")
    for i, e in enumerate(figures.events, 1):
        note = "finished before the kill" if e.finished_first else (e.cut_part or "")
        print(f"{i:>4}  {e.mode:>10}  {e.at_s:>6.1f}  {e.stored_before:>13}  {e.stored_after:>12}  {e.parts_after:>5}  "
              f"{e.orphans:>7}  {note}")
    print(f"SIGKILLs landed: {figures.kills} ({figures.kills_before_first_new_part} before the run stored anything new); "
          f"parts cut short on disk: {figures.cut_parts}, set aside on resume: {figures.parts_set_aside}")
    print(f"samples: expected {figures.expected_samples}, final {figures.final_samples}; lost {figures.lost}, "
          f"duplicated {figures.duplicated}, missing at end {figures.missing_at_end}, differing from the uninterrupted "
          f"run {figures.differing_from_baseline}; orphaned workers {figures.orphans}")
    print(f"wall: uninterrupted (baseline) {figures.baseline_wall_s:.1f} s; killed {figures.kills}× then finished "
          f"{figures.killed_total_wall_s:.1f} s = {ratio:.2f}× the baseline")
    print("RESULT:", "OK" if figures.ok else "FAILED")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--cut-parts", type=int, default=2, help="kills after which the newest part is cut short on disk")
    parser.add_argument("--limit", type=int, default=12, help="problems per task")
    parser.add_argument("-k", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    parser.add_argument("--model", default=None, help="model folder (default: the cached random tiny model)")
    parser.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.model:
        model = Path(args.model)
    else:
        from pr1_eval.testing.tiny_model import cached_tiny_model

        model = cached_tiny_model("random")
    workload = Workload(model, k=args.k, limit=args.limit, max_new_tokens=args.max_new_tokens)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pr1-kill-") as tmp:
        root = Path(args.dir) if args.dir else Path(tmp)
        figures = bench(workload, root, args.kills, args.cut_parts, random.Random(args.seed))
    print_figures(figures, workload)
    if args.json:
        Path(args.json).write_text(json.dumps({**asdict(figures), "ok": figures.ok}, indent=2, default=str))
    return 0 if figures.ok else 1


def run_short(model: Path, root: Path, kills: int = 2, cut_parts: int = 1, seed: int = 0, **workload: Any) -> Figures:
    """The CI version: a few kills on a smaller workload; returns the figures."""
    figures = bench(Workload(model, **workload), root, kills, cut_parts, random.Random(seed))
    return figures


if __name__ == "__main__":
    raise SystemExit(main())
