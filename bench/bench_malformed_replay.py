"""Round six's cases of ``bench/bench_malformed.py``: replay specs and CSVs, ``--html`` targets,
Parallel-Probe files and pathological tag structures in ``analyze`` (audit of 2026-12-06).

A case with ``refuse=True`` must end in one ``error:`` line: accepted, it counts as a silent
change (a row of numbers for a value outside its parameter's range, a file written over a run's
record, a repeated key taken). ``note=...``: accepted is right only when stderr says so.
Imported by :mod:`bench_malformed_cases` (``all_cases``); sizes follow the audit's, ``small``
keeps the analyze cases to what CI can run in seconds.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path

Build = Callable[[Path], tuple[list[str], dict[str, str]]]

#: The audit's controller specs: (spec, refused?). Accepted ones must give a row that means what it says.
SPECS = [("sc@inf", True), ("sc@nan", True), ("sc@1e400", True), ("esc@8:window=0", True),
         ("esc@8:window=nan", True), ("esc@8:window=1e400", True), ("esc@8:window=8.5", True),
         ("probe@4:max_steps=1e12", True), ("probe@4:burst=2.5", True), ("probe@200", True), ("probe-all@200", True),
         ("sc@99999999", True), ("sc@1.5", True), ("esc@8:window=-8", True), ("probe@4:stable=0", True),
         ("probe@4:stable=-1", True), ("sac:burst=0", True), ("sac:patience=-3", True), ("asc@4:threshold=nan", True),
         ("asc@4:threshold=-1", True), ("asc@4:threshold=2", True), ("probe@4:stable=1e400", True), ("sc@200", True),
         ("sc@0", True), ("sc@-1", True), ("vote@4", True), ("SC@4", True), ("$(id)@4", True), ("sc@4;rm -rf /", True),
         ("@4", True), ("sc@٣", True), ("sc@4", False), ("esc@8:window=4", False), ("asc@4:threshold=0.9", False),
         ("sac:patience=3", False), ("probe@8:stable=2", False), ("probe-all@8:max_steps=1000000", False)]


def trajectories(path: Path, questions: int = 3, branches: int = 8, seed: int = 0) -> Path:
    """A small, consistent Parallel-Probe file (probes fit the tokens)."""
    rng = random.Random(seed)
    data = []
    for q in range(questions):
        each = []
        for _ in range(branches):
            final = str(q) if rng.random() < 0.6 else "ERR"
            probes = [rng.choice(["ERR", final]) for _ in range(rng.randint(1, 6))]
            each.append([probes, 500 * len(probes) + rng.randint(0, 400), final])
        data.append({"question": f"Problem {q}", "gold_answer": str(q), "probe_freq": 500,
                     "final_answers_trace": [b[2] for b in each], "each_branch": each})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _replay(extra: list[str], setup: Callable[[Path], None] | None = None) -> Build:
    def build(folder: Path) -> tuple[list[str], dict[str, str]]:
        source = trajectories(folder / "m__toyset.json")
        if setup is not None:
            setup(folder)
        return ["replay", str(source), "--seeds", "3", *[a.format(folder=folder) for a in extra]], {}
    return build


HEADER = "Solver,Strategy,Acc,Cost,Seq_Cost,solver_n\n"
CSVS: dict[str, tuple[bytes | None, bool, str]] = {  # name: (bytes or None for a /dev/zero link, refused?, note)
    "a short row": ((HEADER + "MajorityVoteSolver,FullReadStrategy,80\n").encode(), True, ""),
    "Acc abc": ((HEADER + "MajorityVoteSolver,FullReadStrategy,abc,1,1,4\n").encode(), True, ""),
    "Acc NaN": ((HEADER + "MajorityVoteSolver,FullReadStrategy,NaN,1,1,4\n").encode(), True, ""),
    "not UTF-8": (HEADER.encode() + b"MajorityVoteSolver,FullReadStrategy,8\xff,1,1,4\n", True, ""),
    "a link to /dev/zero": (None, True, ""),
    "two matching rows": ((HEADER + "MajorityVoteSolver,FullReadStrategy,50,1,1,4\n" * 2).encode(), False,
                          "holds 2 rows for sc@4"),
    "header only": (HEADER.encode(), True, ""),
}


def _authors_csv(data: bytes | None) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        target = folder / "matrix_results_m__toyset_raw.csv"
        if data is None:
            target.symlink_to("/dev/zero")
        else:
            target.write_bytes(data)
    return setup


def _html_target(kind: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        if kind == "fifo":
            os.mkfifo(folder / "fig.html")
        if kind in ("run", "part"):
            from bench_malformed_cases import _made_run  # a real run whose files must survive

            _made_run(folder)
    return setup


def probe_file_cases() -> list[tuple[str, Callable[[Path], Path], bool]]:
    """(name, writer of a damaged trajectory file, refused?)."""
    def edit(change: Callable[[str], str]) -> Callable[[Path], Path]:
        def write(folder: Path) -> Path:
            path = trajectories(folder / "m__mytask.json")
            path.write_text(change(path.read_text(encoding="utf-8")), encoding="utf-8")
            return path
        return write

    def one(branch: list[object]) -> Callable[[Path], Path]:
        def write(folder: Path) -> Path:
            path = folder / "m__mytask.json"
            path.write_text(json.dumps([{"question": "q", "gold_answer": "204", "probe_freq": 500,
                                         "each_branch": [branch]}]), encoding="utf-8")
            return path
        return write

    return [
        ("duplicate gold_answer", edit(lambda t: t.replace('"gold_answer": "0"', '"gold_answer": "0", "gold_answer": "9"', 1)), True),
        ("duplicate each_branch", edit(lambda t: t.replace('"each_branch": ', '"each_branch": [[["1"], 600, "1"]], "each_branch": ', 1)), True),
        ("100,000 probes on 3,856 tokens", one([["204"] * 100_000, 3856, "204"]), True),
        ("a line break in the final answer", one([["204"], 3856, "999\nFinal Answer: 204"]), True),
        ("probes that fit the tokens", one([["204"] * 8, 3856, "204"]), False),
    ]


def _probe_case(write: Callable[[Path], Path], command: str) -> Build:
    def build(folder: Path) -> tuple[list[str], dict[str, str]]:
        path = write(folder)
        if command == "import":
            return ["import", str(path), "--format", "parallel-probe", "--out", str(folder / "run"),
                    "--grade-workers", "0"], {}
        return ["replay", str(path), "--controller", "sc@1", "--seeds", "2"], {}
    return build


def tag_responses(small: bool) -> dict[str, str]:
    """Pathological tag structures (the audit's, smaller with ``small``)."""
    scale = 10 if small else 1
    return {
        "one block of many paths": "<Parallel>" + "".join(f"<Path>case {i} holds</Path>" for i in range(4000 // scale))
        + "</Parallel><Summary>ok</Summary>\nFinal Answer: 1",
        "nesting 20,000 deep": "<Parallel><Path>" * (20_000 // scale) + "x" + "</Path></Parallel>" * (20_000 // scale)
        + "\nFinal Answer: 1",
        "50,000 unclosed tags": "<Parallel><Path>a " * (25_000 // scale) + "\nFinal Answer: 1",
        "blocks of 20 paths": ("<Parallel>" + "".join(f"<Path>p {i} w</Path>" for i in range(20))
                               + "</Parallel><Summary>s</Summary>\n") * (2_000 // scale) + "Final Answer: 1",
    }


def _analyze_case(text: str) -> Build:
    def build(folder: Path) -> tuple[list[str], dict[str, str]]:
        from bench_malformed_cases import _made_run, line

        run = _made_run(folder, [line("p0", 0, "1", response=json.dumps(text + "\n"))])
        return ["analyze", str(run), "--no-embeddings", "--json", "--out", str(folder / "o")], {"PR1_ANALYSIS_WORKERS": "1"}
    return build


def round_six_cases(case: Callable[..., object], small: bool = False) -> list[object]:
    """Every case of this module, built with ``case(name, source, build, refuse=..., note=...)``."""
    out = [case(f"replay --controller {spec}", "replay specs", _replay(["--controller", spec, "--json"]), refuse=refuse)
           for spec, refuse in SPECS]
    out += [case(f"--authors {name}", "replay --authors CSVs",
                 _replay(["--controller", "sc@4", "--authors", "{folder}/matrix_results_m__toyset_raw.csv"],
                         _authors_csv(data)), refuse=refuse, note=note or None)
            for name, (data, refuse, note) in CSVS.items()]
    targets = {"RUN/run.json": ("{folder}/runs/r/run.json", "run"), "a part": ("{folder}/runs/r/samples.parquet/x.html", "part"),
               "a FIFO": ("{folder}/fig.html", "fifo"), "an empty name": ("", ""), "a folder": ("{folder}", "")}
    out += [case(f"replay --html {name}", "replay --html targets",
                 _replay(["--controller", "sc@2", "--html", target], _html_target(kind)), refuse=True)
            for name, (target, kind) in targets.items()]
    for name, write, refuse in probe_file_cases():
        for command in ("import", "replay"):
            out.append(case(f"{command}: {name}", "Parallel-Probe files", _probe_case(write, command), refuse=refuse))
    out += [case(f"analyze: {name}", "analyze tag structures", _analyze_case(text))
            for name, text in tag_responses(small).items()]
    return out
