"""Bench: every report, leaderboard, analysis and replay output of this tree, byte for byte against
another revision's (default :data:`BASE`, the commit before the statistics moved into
``pr1_eval/stats/`` and ``analysis/`` into rooms).

Why a bench and not a test: the other revision's code comes from ``git archive`` (a clone without
the history has nothing to compare with, and says so), and the full comparison runs the demo and
the real trajectories, minutes of work. Why byte for byte: a move of code must change no output;
a number that moves in its last digit is a change.

The inputs are built once, by this tree: a tiny synthetic sweep (:func:`bench_dashboard.build`),
Parallel-Probe trajectories imported as runs (``--probe``: the real files; else a small synthetic
one), the real ``parallel_gsm8k`` traces imported as a run (``--real``), and the demo's run
(``--demo``). Then, for each revision in turn, one child process (the revision's code first on
``sys.path``, its own plugin entry points, caches off) runs every command of :func:`commands` with
the same argv in the same folders, each command's stdout and files kept; the two sets of files
are compared and a table printed. Exit status 1 when any output differs.

    .venv/bin/python bench/bench_same_outputs.py [--base REV] [--small] [--demo] [--real] [--probe DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

#: The commit before the move of issue 57 (statistics in one room, analysis in rooms).
BASE = "a562279"

#: Runs each command of the JSON list in ``argv[1]`` through ``pr1_eval.cli.main``, its stdout (fd 1,
#: so C-level writes too) into ``argv[2]/NAME.stdout`` and its exit status into ``NAME.code``.
DRIVER = """import json, os, sys
from pr1_eval.cli.main import main
commands, out = json.load(open(sys.argv[1])), sys.argv[2]
for name, argv in commands:
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.path.join(out, name + ".stdout"), "wb") as f:
        os.dup2(f.fileno(), 1)
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
        sys.stdout.flush()
        os.dup2(saved, 1)
    os.close(saved)
    open(os.path.join(out, name + ".code"), "w").write(str(code))
"""


def tree_of(rev: str, into: Path) -> Path | None:
    """The files of ``rev`` under ``into`` (``git archive``); None when this clone lacks ``rev``."""
    check = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        return None
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def entry_points_of(tree: Path, into: Path) -> Path:
    """A folder holding ``pr1_eval``'s metadata with ``tree``'s plugin entry points (put before the
    installed one on ``sys.path``, it is the one ``importlib.metadata`` reads)."""
    plugins = tomllib.loads((tree / "pyproject.toml").read_text())["project"]["entry-points"]["pr1_eval.commands"]
    info = into / "pr1_eval-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pr1_eval\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[pr1_eval.commands]\n" + "".join(f"{k} = {v}\n" for k, v in plugins.items()))
    return into


def build_inputs(work: Path, args: argparse.Namespace) -> dict[str, list[Path]]:
    """Every input, by case name: run folders (or trajectory files for ``probe-files``)."""
    from bench_dashboard import build

    from pr1_eval.cli.main import main

    cases: dict[str, list[Path]] = {}
    size = (2, 6, 4) if args.small else (4, 40, 8)
    cases["sweep"] = build(work / "sweep", *size)
    probe_files = sorted(Path(args.probe).glob("Qwen3-*.json")) if args.probe else []
    if not probe_files:
        from tests.support.probe_fixtures import write_trajectories

        (work / "probe").mkdir(parents=True)
        probe_files = [write_trajectories(work / "probe" / "Qwen3-8B-128__aime24.json")]
    probe_runs = []
    for file in [] if args.small else probe_files:  # --small: the replay of the file only
        run = work / "probe-runs" / file.stem
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
            code = main(["import", str(file), "--format", "parallel-probe", "--out", str(run)])
        if code != 0:
            raise SystemExit(f"could not import {file}")
        probe_runs.append(run)
    if probe_runs:
        cases["probe-runs"] = probe_runs
    cases["probe-files"] = probe_files[: 1 if args.small else None]
    if args.real:
        from analysis.common.real_data import import_parallel_gsm8k

        cases["real"] = [import_parallel_gsm8k(work / "real" / "parallel_gsm8k", args.real)]
    if args.demo:
        from pr1_eval.cli.demo import run_demo

        cases["demo"] = [run_demo(work / "demo")]
    return cases


def commands(cases: dict[str, list[Path]], small: bool) -> list[tuple[str, list[str]]]:
    """(name, argv) of every command compared; files they write go under ``out/NAME``."""
    out: list[tuple[str, list[str]]] = []
    for case, paths in cases.items():
        items = [str(p) for p in paths]
        if case == "probe-files":
            controllers = [a for spec in ("sc@8", "esc@8", "asc@8", "cert@8", "probe@8") for a in ("--controller", spec)]
            controllers += ["--seeds", "3" if small else "20"]
            out += [(f"{case}-replay", ["replay", *items, *controllers]),
                    (f"{case}-replay-json", ["replay", *items, *controllers, "--json", "--html", f"out/{case}-replay.html"])]
            continue
        out += [(f"{case}-report-{i}", ["report", p, "--json"]) for i, p in enumerate(items[:1] if small else items)]
        out += [(f"{case}-leaderboard-json", ["leaderboard", *items, "--json"]),
                (f"{case}-analyze", ["analyze", *items, "--no-embeddings", "--json", "--out", f"out/{case}-analyze"])]
        if not small:
            out += [(f"{case}-report-text", ["report", items[0]]),
                    (f"{case}-leaderboard-text", ["leaderboard", *items]),
                    (f"{case}-leaderboard-md", ["leaderboard", *items, "--markdown"]),
                    (f"{case}-leaderboard-csv", ["leaderboard", *items, "--csv"]),
                    (f"{case}-leaderboard-html", ["leaderboard", *items, "--html", f"out/{case}-leaderboard.html"]),
                    (f"{case}-replay", ["replay", *items, "--seeds", "5", "--json"])]
            if len(items) > 1:
                out.append((f"{case}-decided", ["leaderboard", *items, "--until-decided", "best"]))
    return out


def run_tree(tree: Path, meta: Path, work: Path, listed: Path, keep: Path, small: bool) -> float:
    """Every command under ``tree``'s code, in ``work``; their outputs moved to ``keep``. Seconds.
    ``small``: the analysis in one process (its workers give the same tables, and forking them is
    most of a tiny analysis' time)."""
    (work / "out").mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(meta)]), "PR1_CACHE": "off"}
    if small:
        env["PR1_ANALYSIS_WORKERS"] = "1"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", DRIVER, str(listed), "out"], cwd=work, env=env, check=True,
                   stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    shutil.move(work / "out", keep)
    return seconds


#: plotly names each figure's ``<div>`` by a fresh uuid4 on every draw, so two draws of one figure by
#: the same code differ there; the only bytes the comparison replaces (in ``.html`` files).
UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` by relative name (plotly's div ids blanked in pages)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            found[str(path.relative_to(folder))] = hashlib.sha256(
                UUID.sub(b"UUID", data) if path.suffix == ".html" else data).hexdigest()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=BASE, help="the revision compared with (default %(default)s)")
    parser.add_argument("--small", action="store_true", help="the smoke size (.ci/run)")
    parser.add_argument("--demo", action="store_true", help="also the demo's run (builds the tiny model)")
    parser.add_argument("--real", default=None, metavar="JSONL", help="also parallel_gsm8k traces imported as a run")
    parser.add_argument("--keep", default=None, metavar="DIR", help="keep both revisions' outputs here")
    parser.add_argument("--probe", default=os.environ.get("PARALLEL_PROBE_DATA"), metavar="DIR",
                        help="Parallel-Probe trajectory files (default $PARALLEL_PROBE_DATA; else a synthetic one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="same-outputs-") as tmp:
        tmp_path = Path(tmp)
        base = tree_of(args.base, tmp_path / "base")
        if base is None:
            print(f"skipped: revision {args.base} is not in this clone (a clone with its history compares)")
            return 0
        work = tmp_path / "work"
        cases = build_inputs(work, args)
        listed = tmp_path / "commands.json"
        listed.write_text(json.dumps(commands({k: v for k, v in cases.items()}, args.small)))
        seconds = {}
        for name, tree in (("base", base), ("this tree", ROOT)):
            meta = entry_points_of(tree, tmp_path / f"meta-{name}")
            seconds[name] = run_tree(tree, meta, work, listed, tmp_path / f"out-{name}", args.small)
        before, after = digests(tmp_path / "out-base"), digests(tmp_path / "out-this tree")
        rows = []
        for case in cases:
            names = sorted({n for n in (*before, *after) if n.startswith(f"{case}-")})
            same = [n for n in names if before.get(n) == after.get(n)]
            rows.append((case, len(names), len(same), [n for n in names if n not in same]))
        if args.keep:
            shutil.copytree(tmp_path, args.keep, ignore=shutil.ignore_patterns("base", "work"), dirs_exist_ok=True)
        codes = {n: (tmp_path / "out-this tree" / n).read_text() for n in after if n.endswith(".code")}
    print(f"{'inputs':<12} {'files':>6} {'identical':>10}  differing")
    for case, n, same, differing in rows:
        print(f"{case:<12} {n:>6} {same:>10}  {', '.join(differing) or '-'}")
    failed = sorted(n for n, c in codes.items() if c not in ("0", "None"))
    print(f"base {args.base}: {seconds['base']:.1f} s; this tree: {seconds['this tree']:.1f} s; "
          f"{sum(r[1] for r in rows)} files; commands that exited non-zero (the same in both): {failed or 'none'}")
    return 1 if any(r[3] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
