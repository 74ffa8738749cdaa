"""Reliability bench: malformed inputs through the real CLI; counts tracebacks and silent changes.

Why: the house rule is "bad input gets one clear line, never a traceback, never a silent change
of a number". An audit (reliability, turn 5) fed 239 malformed inputs to the CLI and found 10
tracebacks and 9 silent changes; this bench replays that set and more, so a regression is seen
by CI, not by the next audit. Each case builds its files in a scratch folder, runs one command as
a user would and classifies the outcome:

* **traceback**: a Python traceback on stderr, an exception out of ``main()``, or the CLI's own
  "internal error" line (its last line of defence, still a bug). Must be 0.
* **silent change**: the command was accepted (exit 0/1), said nothing (no ``warning``, not
  marked incomplete), and a number a reader prints (``report --json``/``leaderboard --json``:
  the task's k, mean@k and number of problems) differs from what the file meant. Must be 0.
  (A VERL import's stored rewards are not read back: its cases count as accepted, not checked.)
* **clean error**: a non-zero exit with an ``error:`` line and no traceback.
* **accepted, correct**: accepted and the numbers are what the file meant; **accepted,
  flagged**: accepted with a warning or an incomplete mark (numbers may differ: said, not
  silent); **accepted, not checked**: accepted where no number is read (``analyze``).

The sources: import JSONL (fields × bad values, encodings, nesting, duplicate keys), lm-eval
samples, VERL dumps, hand-edited or damaged ``run.json`` and parts (each read by ``report``,
``leaderboard`` and ``analyze``), ``run`` values and environment variables, other commands'
values, output paths, ``run --engine openai`` against a misbehaving server on 127.0.0.1
(``bench_malformed_endpoint.py``: endless bodies, trickles, wrong types, fewer choices than ``n``,
redirects, errors echoing the API key, a failing ``/models``, a context below the prompt; an
accepted run is read back: complete, 2 × 2 samples, none empty or copied; the key printed is a
silent change), and the caches (an entry damaged, or copied from another analysis: the
document must equal the cache-off one). Kills of writers: ``bench/bench_kill_resume.py``
covers ``run``; here ``--kills N`` SIGKILLs ``import`` and ``leaderboard --html`` N times each
and checks that the stored rows are whole and that no temporary file is left after the next write.

Size: the full set (default) runs each case in its own subprocess (``python -m pr1_eval``);
``--small`` (bench/smoke.sh) runs a fixed sample of every source in this process through
``main()``. The baseline of the timing ratio is the clean import, run in the same process.

    python bench/bench_malformed.py                 # every case, subprocesses, 3 kills each
    python bench/bench_malformed.py --in-process    # every case through main() in this process, no kills
    python bench/bench_malformed.py --small         # CI: a sample in-process, no kills

Exit status 1 when any traceback or silent change is counted (or a cache case differs, or a kill
loses rows). Cases that need another change of issue 48 (duplicate JSON keys, missing part
columns, lm-eval empty generations, VERL non-finite scores, cache entry keys) are in the set: on
a tree without those fixes they count as silent changes, and the bench fails, by design.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_malformed_cases as cases_module  # noqa: E402 - bench/ is on sys.path when run as a script
import bench_malformed_endpoint as endpoint_module  # noqa: E402

from pr1_eval.cli.main import main  # noqa: E402

MEANT = cases_module.MEANT


#: Every case runs under this deadline; past it the case is a hang (killed, counted, never waited on).
DEADLINE_S = 120
#: The stated memory bound: a case whose command peaks above this RSS is counted as a finding. In
#: subprocesses each case's own peak (the command and its workers); in-process (``--small``) the
#: process's peak so far, which only grows, so the bound holds for every case run before it.
MEMORY_BOUND_MB = 1536
HANG = -9999
_PEAK = "[bench-peak-rss-kb "
#: The command as ``python -m pr1_eval`` runs it, printing its peak RSS (itself and reaped children) at exit.
_WRAP = ("import atexit, resource, sys\n"
         "def peak():\n"
         "    kb = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
         f"    sys.stderr.write('\\n{_PEAK}' + str(kb) + ']\\n')\n"
         "atexit.register(peak)\n"
         "from pr1_eval.cli.main import main\n"
         "sys.exit(main(sys.argv[1:]))\n")


class _Deadline(BaseException):
    """Raised by SIGALRM in-process: the case ran past :data:`DEADLINE_S`."""


@dataclass
class Outcome:
    """One case's result."""

    name: str
    source: str
    kind: str
    detail: str = ""
    peak_mb: float | None = None
    seconds: float = 0.0


@dataclass
class Runner:
    """Runs a command in-process (``main()``) or as a subprocess; returns (status, stdout, stderr)."""

    subprocess_mode: bool
    seconds: list[float] = field(default_factory=list)
    peak_mb: float | None = None  # of the last command

    def __call__(self, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, str, str]:
        started = time.perf_counter()
        try:
            return self._subprocess(argv, env, cwd) if self.subprocess_mode else self._inprocess(argv, env, cwd)
        finally:
            self.seconds.append(time.perf_counter() - started)

    def _subprocess(self, argv: list[str], env: dict[str, str] | None, cwd: Path | None) -> tuple[int, str, str]:
        full = {**os.environ, **(env or {})}
        proc = subprocess.Popen([sys.executable, "-c", _WRAP, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=full, cwd=cwd, errors="replace", start_new_session=True)
        try:
            out, err = proc.communicate(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            self.peak_mb = None
            return HANG, "", ""
        head, _, tail = err.rpartition(_PEAK)
        self.peak_mb = int(tail.split("]")[0]) / 1024 if tail and head is not None and _PEAK in err else None
        return proc.returncode, out, head.rstrip("\n") if _PEAK in err else err

    def _inprocess(self, argv: list[str], env: dict[str, str] | None, cwd: Path | None) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        saved, here = dict(os.environ), os.getcwd()
        os.environ.update(env or {})
        try:
            if cwd is not None:
                os.chdir(cwd)
            previous = signal.signal(signal.SIGALRM, _on_alarm)
            signal.alarm(DEADLINE_S)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    status = main(argv)
                except _Deadline:
                    status = HANG
                except SystemExit as exc:
                    status = exc.code if isinstance(exc.code, int) else 2
                except BaseException as exc:  # noqa: BLE001 - what escapes main() is the finding
                    print(f"Traceback (most recent call last):\n  escaped main(): {exc!r}", file=sys.stderr)
                    status = 1
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
            os.chdir(here)
            os.environ.clear()
            os.environ.update(saved)
        self.peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return status, out.getvalue(), err.getvalue()


def _on_alarm(signum: int, frame: object) -> None:
    raise _Deadline


def is_traceback(err: str) -> bool:
    return "Traceback (most recent call last)" in err or "error: internal error" in err


def task_numbers(doc: dict, reader: str) -> tuple[bool, tuple[object, ...]] | None:
    """(complete, (k, mean@k, problems)) of task ``t`` from a ``report --json`` or
    ``leaderboard --json`` document."""
    if reader == "report":
        task = (doc.get("tasks") or {}).get("t")
        complete = bool(doc.get("complete")) and bool((task or {}).get("complete"))
    else:
        runs = doc.get("runs") or []
        task = (runs[0].get("tasks") or {}).get("t") if runs else None
        complete = bool(runs and runs[0].get("complete"))
    if not task:
        return None
    k, mean = task.get("k"), task.get(f"mean@{task.get('k')}")
    return complete, (k, None if mean is None else round(float(mean), 6), task.get("n_problems"))


def classify(case: cases_module.Case, run: Runner, scratch: Path, index: int) -> Outcome:
    """:func:`_classify`, with the command's peak memory (over :data:`MEMORY_BOUND_MB`: a finding)."""
    first = len(run.seconds)
    try:
        outcome = _classify(case, run, scratch, index)
    finally:
        endpoint_module.shut_down()  # a case's server on 127.0.0.1, whatever the case did
    outcome.peak_mb = run.peak_mb
    outcome.seconds = sum(run.seconds[first:])
    if outcome.kind not in BAD and run.peak_mb is not None and run.peak_mb > MEMORY_BOUND_MB:
        outcome.kind, outcome.detail = "over memory bound", f"peak {run.peak_mb:,.0f} MB"
    return outcome


def _classify(case: cases_module.Case, run: Runner, scratch: Path, index: int) -> Outcome:
    """Build the case's files, run its command (and a reader of what it wrote), classify."""
    folder = scratch / f"case-{index:04d}"
    folder.mkdir()
    argv, env = case.build(folder)
    status, out, err = run(argv, env, folder)
    if status == HANG:
        return Outcome(case.name, case.source, "hang", f"still running after {DEADLINE_S} s")
    if is_traceback(err):
        return Outcome(case.name, case.source, "traceback", err.strip().splitlines()[-1][:200])
    if case.secret is not None and case.secret in out + err:
        return Outcome(case.name, case.source, "silent change", "printed the API key")
    if status not in (0, 1):
        said = any("error:" in line for line in err.splitlines())
        last = err.strip().splitlines()[-1][:200] if err.strip() else ""
        return Outcome(case.name, case.source, "clean error" if said else "silent failure", last)
    if case.refuse:
        return Outcome(case.name, case.source, "silent change", "accepted a value it must refuse")
    if case.check is not None:
        wrong = case.check(folder)
        return Outcome(case.name, case.source, "silent change" if wrong else "accepted, correct", wrong or "")
    if case.note is not None:
        kind = "accepted, flagged" if case.note in err else "silent change"
        return Outcome(case.name, case.source, kind, "" if case.note in err else f"no note {case.note!r}")
    warned = "warning" in err.lower() or "incomplete" in (out + err).lower()
    reader, document = case.reader, out
    if case.reader == "report" and case.writes is not None:  # an import: read what it stored
        status, document, err2 = run(["report", str(folder / case.writes), "--json"], env, folder)
        if is_traceback(err2):
            return Outcome(case.name, case.source, "traceback", err2.strip().splitlines()[-1][:200])
        if status not in (0, 1):
            return Outcome(case.name, case.source, "clean error", "(stored, then refused by report)")
        warned = warned or "warning" in err2.lower()
    if reader is None or case.meant is None:
        return Outcome(case.name, case.source, "accepted, flagged" if warned else "accepted, not checked")
    try:
        numbers = task_numbers(json.loads(document), reader)
    except ValueError:
        return Outcome(case.name, case.source, "accepted, not checked", "no JSON")
    if numbers is None:
        return Outcome(case.name, case.source, "accepted, flagged" if warned else "accepted, not checked")
    complete, got = numbers
    if got == case.meant and complete:
        return Outcome(case.name, case.source, "accepted, correct")
    shown = f"(k, mean@k, problems) {got}; the file meant {case.meant}"
    if warned or not complete:
        return Outcome(case.name, case.source, "accepted, flagged", shown)
    return Outcome(case.name, case.source, "silent change", shown)


# ----- caches ---------------------------------------------------------------------------------------
def cache_checks(run: Runner, scratch: Path, small: bool) -> list[Outcome]:
    """Damaged or foreign cache entries: ``analyze --json`` must print the cache-off document."""
    root = scratch / "cache-case"
    runs = cases_module.two_runs(root)

    def analyze(target: Path, env_cache: str) -> str:
        status, out, err = run(["analyze", str(target), "--no-embeddings", "--json", "--out", str(root / "o")],
                               {"PR1_CACHE": env_cache})
        return out if status == 0 and not is_traceback(err) else f"failed: {err.strip()[-200:]}"

    reference = {name: analyze(path, "off") for name, path in runs.items()}
    outcomes = []
    damages = cases_module.CACHE_DAMAGES[:2] if small else cases_module.CACHE_DAMAGES
    for i, (name, damage) in enumerate(damages):
        cache = root / f"cache-{i}"  # a fresh cache each time: a's entry written first, then b's
        for path in runs.values():
            analyze(path, str(cache))  # warm
        damage(cache)
        got = analyze(runs["a"], str(cache))
        kind = "cache ok" if got == reference["a"] else "cache served wrong"
        detail = "" if kind == "cache ok" else (" ".join(got.split())[:160] if got.startswith("failed") else
                                                "analyze --json printed another document than the cache-off one")
        outcomes.append(Outcome(f"cache: {name}", "cache", kind, detail))
    return outcomes


# ----- kills ----------------------------------------------------------------------------------------
def kill_checks(scratch: Path, kills: int, seed: int) -> list[Outcome]:
    """SIGKILL ``import`` and ``leaderboard --html`` at random moments; then: rows whole, the next
    write leaves no temporary file."""
    rng = random.Random(seed)
    root = scratch / "kills"
    source = cases_module.big_import(root, problems=300)
    outcomes = []
    for i in range(kills):
        out = root / f"imp{i}"
        lost = _kill_then_rerun(["import", str(source), "--out", str(out), "--grade-workers", "1"], rng.uniform(1, 5))
        rows = cases_module.stored_rows(out)
        kind = "kill ok" if rows == 600 and not lost else "kill lost rows"
        outcomes.append(Outcome(f"kill import #{i}", "kills", kind, f"{rows} rows"))
    page = root / "lb.html"
    for i in range(kills):
        _kill_then_rerun(["leaderboard", str(root), "--html", str(page)], rng.uniform(1.5, 6))
        strays = [p.name for p in root.iterdir() if p.name.endswith(".tmp")]
        kind = "kill ok" if page.is_file() and page.stat().st_size > 0 and not strays else "kill left a stray file"
        outcomes.append(Outcome(f"kill leaderboard --html #{i}", "kills", kind, ", ".join(strays)))
    return outcomes


def _kill_then_rerun(argv: list[str], delay: float) -> bool:
    """Start, SIGKILL its process group after ``delay`` s, rerun to the end; whether the rerun failed."""
    command = [sys.executable, "-m", "pr1_eval", *argv]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    refused = "already holds a run" in done.stderr
    return done.returncode != 0 and not refused


# ----- main -----------------------------------------------------------------------------------------
ORDER = ("traceback", "silent change", "silent failure", "hang", "over memory bound", "clean error", "accepted, correct", "accepted, flagged",
         "accepted, not checked", "cache ok", "cache served wrong", "kill ok", "kill lost rows",
         "kill left a stray file")
BAD = {"traceback", "silent change", "silent failure", "hang", "over memory bound", "cache served wrong", "kill lost rows", "kill left a stray file"}


def report(outcomes: list[Outcome], seconds: float, baseline: float) -> int:
    sources = sorted({o.source for o in outcomes})
    counts = {s: Counter(o.kind for o in outcomes if o.source == s) for s in sources}
    kinds = [k for k in ORDER if any(counts[s][k] for s in sources)]
    width = max(len(s) for s in sources)
    print(f"{'source':<{width}}  cases  " + "  ".join(kinds))
    for s in sources:
        print(f"{s:<{width}}  {sum(counts[s].values()):5d}  " + "  ".join(f"{counts[s][k]:>{len(k)}d}" for k in kinds))
    total = Counter(o.kind for o in outcomes)
    print(f"{'total':<{width}}  {len(outcomes):5d}  " + "  ".join(f"{total[k]:>{len(k)}d}" for k in kinds))
    for o in outcomes:
        if o.kind in BAD:
            print(f"  {o.kind}: [{o.source}] {o.name}: {o.detail}")
    peaks = {src: max((o.peak_mb for o in outcomes if o.source == src and o.peak_mb is not None), default=None)
             for src in sources}
    print("peak RSS per source (MB, the largest case): " + ", ".join(
        f"{src} {p:,.0f}" for src, p in peaks.items() if p is not None)
        + f"; bound {MEMORY_BOUND_MB:,} MB per case, deadline {DEADLINE_S} s per case")
    slowest = {src: max((o for o in outcomes if o.source == src), key=lambda o: o.seconds) for src in sources}
    print("slowest case per source: " + "; ".join(f"{src} {o.seconds:.1f} s ({o.name})" for src, o in slowest.items()))
    print(f"tracebacks {total['traceback']}, silent changes {total['silent change']}, hangs {total['hang']}; "
          f"{seconds:.1f} s, {seconds / max(len(outcomes), 1) / baseline:.2f}x a clean import per case "
          f"(clean import {baseline:.2f} s, same process)")
    return 1 if any(total[k] for k in BAD) else 0


def main_bench(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="a sample of every source, in-process (CI)")
    parser.add_argument("--in-process", action="store_true", help="every case, in this process (fast; no kills "
                                                                     "unless --kills)")
    parser.add_argument("--kills", type=int, default=None, help="SIGKILLs of import and of leaderboard --html each "
                                                               "(default 3; 0 with --small)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=None, metavar="TEXT",
                        help="only the sources whose name holds TEXT (e.g. replay); no cache or kill checks")
    args = parser.parse_args(argv)
    kills = args.kills if args.kills is not None else (0 if args.small or args.in_process else 3)
    all_cases = cases_module.all_cases(small=args.small)
    chosen = cases_module.sample(all_cases, args.seed) if args.small else all_cases
    if args.only:
        chosen = [c for c in chosen if args.only in c.source]
        kills = 0
    print(f"{len(all_cases)} malformed inputs in the set; running {len(chosen)}"
          f"{' (sample)' if args.small else ''}{' in-process' if args.small or args.in_process else ' (subprocesses)'}")
    run = Runner(subprocess_mode=not (args.small or args.in_process))
    with tempfile.TemporaryDirectory(prefix="bench-malformed-") as tmp:
        scratch = Path(tmp)
        os.environ["PR1_CACHE"] = "off"
        baseline = clean_import_seconds(run, scratch)
        started = time.perf_counter()
        outcomes = [classify(case, run, scratch, i) for i, case in enumerate(chosen)]
        outcomes += [] if args.only else cache_checks(run, scratch, args.small)
        if kills:
            outcomes += kill_checks(scratch, kills, args.seed)
        return report(outcomes, time.perf_counter() - started, baseline)


def clean_import_seconds(run: Runner, scratch: Path) -> float:
    """The baseline: a clean import of the base file, timed in this process's mode."""
    folder = scratch / "baseline"
    folder.mkdir()
    source = cases_module.write_lines(folder / "ok.jsonl", cases_module.base_lines())
    started = time.perf_counter()
    status, _, err = run(["import", str(source), "--out", str(folder / "run"), "--grade-workers", "0"])
    if status != 0:
        raise SystemExit(f"the clean import failed: {err[-300:]}")
    return time.perf_counter() - started


if __name__ == "__main__":
    raise SystemExit(main_bench())

