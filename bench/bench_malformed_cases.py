"""The malformed inputs of ``bench/bench_malformed.py``: each builds its files and names its command.

Every import case starts from one clean file (2 problems x k 2, gold "1"; p0 right twice, p1 right
once: mean@2 0.75) and damages one line or one option, so "what the file meant" is known: the
clean file's k 2, mean@2 0.75 and 2 problems (:data:`MEANT`). Run-record cases damage a run made from that
file and read it with ``report``, ``leaderboard`` and ``analyze``. Sources and shapes follow the
reliability audit of 2026-12-04 (Area 5) and add more.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

#: What the clean file means for task t: k 2, mean@2 0.75, 2 problems.
MEANT: tuple[object, ...] = (2, 0.75, 2)
SURROGATE = '"\\ud800x"'
DEEP = "[" * 100_000 + "]" * 100_000
GOOD = [("p0", 0, "1"), ("p0", 1, "1"), ("p1", 0, "1"), ("p1", 1, "2")]

Build = Callable[[Path], tuple[list[str], dict[str, str]]]


@dataclass
class Case:
    """One malformed input: how to build it, which reader checks what it wrote, what it meant."""

    name: str
    source: str
    build: Build
    reader: str | None = None  # "report" / "leaderboard": whose --json numbers are compared
    writes: str | None = None  # an import: the run folder it writes (read back with report --json)
    meant: tuple[object, ...] | None = MEANT
    refuse: bool = False  # must end in one error line: accepted is a silent change (round six's cases)
    note: str | None = None  # accepted is right only when stderr says this
    check: Callable[[Path], str | None] | None = None  # accepted: None when what it stored is right, else what is wrong
    secret: str | None = None  # never to be printed (an API key): on stderr or stdout it is a silent change


def line(pid: str = "p1", idx: object = 1, answer: str = "2", **raw: str | None) -> str:
    """One import line; ``raw``: fields as raw JSON text (None: left out)."""
    fields = {"task": '"t"', "problem_id": json.dumps(pid), "sample_idx": json.dumps(idx),
              "response": json.dumps(f"Final Answer: {answer}"), "gold": '"1"'}
    for name, value in raw.items():
        if value is None:
            fields.pop(name, None)
        else:
            fields[name] = value
    return "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}"


def base_lines() -> list[str]:
    return [line(p, i, a) for p, i, a in GOOD]


def write_lines(path: Path, lines: list[str], *, encoding: str = "utf-8", ending: str = "\n", head: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(head + "".join(x + ending for x in lines).encode(encoding, "surrogatepass"))
    return path


def _import(lines: list[str] | None = None, raw: bytes | None = None, options: tuple[str, ...] = (),
            env: dict[str, str] | None = None) -> Build:
    def build(folder: Path) -> tuple[list[str], dict[str, str]]:
        source = folder / "in.jsonl"
        if raw is not None:
            source.write_bytes(raw)
        else:
            write_lines(source, lines if lines is not None else base_lines())
        return ["import", str(source), "--out", str(folder / "run"), "--grade-workers", "0", *options], env or {}
    return build


def _last(bad: str) -> list[str]:
    """The clean file with its last line replaced by ``bad``."""
    return [*base_lines()[:-1], bad]


def import_cases() -> list[Case]:
    values = {
        "sample_idx": ["1.5", "true", "false", "-1", "1e30", "1E400", "Infinity", "-Infinity", "NaN", '"3"', "null",
                       "[0]", '{"i": 0}', str(2**64), str(2**63)],
        "task": ["5", '""', '"   "', "null", '["t"]', "true", SURROGATE],
        "problem_id": ["1.5", "true", "null", '""', "[1]", '{"x": 1}', SURROGATE],
        "response": ["5", "null", '["a"]', '{"a": 1}', SURROGATE, "true"],
        "problem": ["5", '["x"]', SURROGATE], "model": ["5", '["m"]', SURROGATE],
        "step": ['"abc"', "1.5", "true", "-1", "Infinity", "1e30", '"5"', "NaN", str(10**20)],
        "finish_reason": ["5", "[1]"],
        "gold": ["null", '""', "NaN", '["1"]', '"   "', SURROGATE, "{}"],
    }
    out = [Case(f"{name}={value}", "import JSONL", _import(_last(line(**{name: value}))), "report", "run")
           for name, raws in values.items() for value in raws]
    out += [Case(f"missing {name}", "import JSONL", _import(_last(line(**{name: None}))), "report", "run")  # type: ignore[arg-type]
            for name in ("task", "problem_id", "sample_idx", "response", "gold")]
    text = "\n".join(base_lines()) + "\n"
    raws = {
        "invalid UTF-8": text.encode() + b'{"task": "t\xff"}\n',
        "Latin-1 response": text.replace("Final Answer: 2", "caf\u00e9 Final Answer: 2").encode("latin-1"),
        "UTF-16 file": text.encode("utf-16"),
        "not JSON": text.encode() + b"{task: t}\n",
        "cut short": text.encode() + line("p2", 0)[:30].encode(),
        "a JSON list line": text.encode() + b"[1, 2]\n",
        "a JSON string line": text.encode() + b'"text"\n',
        "nested 100,000 deep": text.encode() + DEEP.encode() + b"\n",
        "a field nested 100,000 deep": (text + line("p2", 0, extra=DEEP) + "\n").encode(),
        "two objects on one line": (text + line("p2", 0) + line("p2", 1) + "\n").encode(),
        "trailing garbage": (text + line("p2", 0) + " x\n").encode(),
        "empty file": b"", "only blank lines": b"\n\n  \n",
        "a key stored twice": (text + base_lines()[0] + "\n").encode(),
    }
    out += [Case(name, "import JSONL", _import(raw=raw), "report", "run") for name, raw in raws.items()]
    accepted = {  # the file means the clean file's numbers
        "BOM": b"\xef\xbb\xbf" + text.encode(), "CRLF": text.replace("\n", "\r\n").encode(),
        "NUL in a response": (text.replace('"Final Answer: 2"', '"x\\u0000y Final Answer: 2"')).encode(),
        "2 MB response": text.replace('"Final Answer: 2"', json.dumps("a " * 1_000_000 + "Final Answer: 2")).encode(),
        "100 kB problem id": text.replace('"p1"', json.dumps("p" * 100_000)).encode(),
        "sample_idx gap to 10**18": text.replace('"sample_idx": 1, "response": "Final Answer: 2"',
                                                 f'"sample_idx": {10**18}, "response": "Final Answer: 2"').encode(),
        "an unknown field": (text.replace('"gold": "1"}', '"gold": "1", "zzz": [1, {"a": null}]}')).encode(),
        "non-ASCII ids": text.replace('"p0"', '"\u554f\u984c-0 \U0001f600"').encode(),
        "sample_idx 1.0": text.replace('"sample_idx": 1, "response": "Final Answer: 2"',
                                       '"sample_idx": 1.0, "response": "Final Answer: 2"').encode(),
    }
    out += [Case(name, "import JSONL", _import(raw=raw), "report", "run") for name, raw in accepted.items()]
    dup = {  # a key twice in one object: the file does not say which; the first (clean) value is what it meant
        "duplicate gold": _last(line().replace('"gold": "1"}', '"gold": "1", "gold": "2"}')),
        "duplicate sample_idx": _last(line(sample_idx='1, "sample_idx": 5')),
        "duplicate response": _last(line(response='"Final Answer: 2", "response": "Final Answer: 1"')),
    }
    out += [Case(name, "import JSONL", _import(lines), "report", "run") for name, lines in dup.items()]
    options = [("--k", "0"), ("--k", "-1"), ("--k", "abc"), ("--k", "t=0"), ("--k", "t=abc"), ("--k", "5"),
               ("--k", "nosuch=2"), ("--answer-policy", "bogus"), ("--grade-workers", "abc"),
               ("--format", "bogus"), ("--k", "1e3")]
    out += [Case(f"import {o} {v}", "import JSONL", _import(options=(o, v)), "report", "run",
                 MEANT if o != "--k" or v in ("5",) else None) for o, v in options]
    return out


# ----- lm-eval ----------------------------------------------------------------------------------------
DATE = "2026-11-29T10-17-07.547336"
SAMPLE = {"doc_id": 0, "doc": {"question": "1+1?"}, "target": "2", "resps": [["Final Answer: 2"]]}
RESULTS = {"configs": {"t": {"output_type": "generate_until", "repeats": 1}}, "versions": {"t": 1},
           "config": {"model": "hf", "model_args": "pretrained=m"}}


def _lm(samples: bytes, results: object = None) -> Build:
    def build(folder: Path) -> tuple[list[str], dict[str, str]]:
        lm = folder / "lm" / "model"
        lm.mkdir(parents=True)
        (lm / f"samples_t_{DATE}.jsonl").write_bytes(samples)
        (lm / f"results_{DATE}.json").write_text(json.dumps(RESULTS if results is None else results))
        return ["import", str(folder / "lm"), "--format", "lm-eval", "--out", str(folder / "run"),
                "--grade-workers", "0"], {}
    return build


def _sample(**raw: str) -> bytes:
    fields = {k: json.dumps(v) for k, v in SAMPLE.items()} | raw
    return ("{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}\n").encode()


def _results(path: tuple[str, ...], value: object) -> dict[str, object]:
    data = json.loads(json.dumps(RESULTS))
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


def lm_eval_cases() -> list[Case]:
    """Two docs, both right (mean@1 1.0) when clean."""
    two = (1, 1.0, 2)
    out = [Case(f"resps={raw}", "lm-eval", _lm(_sample() + _sample(doc_id="1", resps=raw)), "report", "run", two)
           for raw in ("5", "[[5]]", "[[null]]", f"[[{SURROGATE}]]", '"text"', "[[[1]]]", "[]", "[[]]")]
    out += [Case(name, "lm-eval", _lm(data), "report", "run", two) for name, data in {
        "no resps": _sample() + b'{"doc": {}, "doc_id": 1}\n', "doc_id 1.5": _sample() + _sample(doc_id="1.5"),
        "doc_id true": _sample() + _sample(doc_id="true"), "invalid UTF-8": _sample() + b'{"doc": "\xff"}\n',
        "not JSON": _sample() + b"{doc}\n", "clean": _sample() + _sample(doc_id="1"),
        "nested 100,000 deep": _sample() + DEEP.encode() + b"\n"}.items()]
    for path, value in ((("configs", "t", "repeats"), "abc"), (("configs", "t", "repeats"), 0),
                        (("configs", "t", "repeats"), 1.5), (("config",), []), (("versions",), "1"),
                        (("configs", "t", "output_type"), "loglikelihood")):
        out.append(Case(f"results {'.'.join(path)}={value!r}", "lm-eval",
                        _lm(_sample() + _sample(doc_id="1"), _results(path, value)), "report", "run", two))
    return out


# ----- VERL ------------------------------------------------------------------------------------------
FORK_ROW = {"input": "<|im_start|>user\nProblem: What is 1+1?<|im_end|>\n<|im_start|>assistant\n",
            "output": "Final Answer: 2<|im_end|>", "score": 1.0, "step": 5, "acc": 1}


def _dump_line(**raw: str) -> bytes:
    fields = {k: json.dumps(v) for k, v in FORK_ROW.items()} | raw
    return ("{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}\n").encode()


def _verl(files: dict[str, bytes], *options: str) -> Build:
    def build(folder: Path) -> tuple[list[str], dict[str, str]]:
        dump = folder / "rollout"
        dump.mkdir()
        for name, data in files.items():
            (dump / name).write_bytes(data)
        return ["import-verl", str(dump), "--out", str(folder / "runs"), "--final", "--no-benchmarks", "--no-grade",
                *options], {}
    return build


def verl_cases() -> list[Case]:
    ok = _dump_line()
    shapes = {
        "7 and 007": {"7.jsonl": _dump_line(step="7"), "007.jsonl": _dump_line(step="7")},
        "a row of step 6 in 5.jsonl": {"5.jsonl": ok + _dump_line(step="6")},
        **{f"step={raw}": {"5.jsonl": ok + _dump_line(step=raw)}
           for raw in ('"abc"', "1.5", "Infinity", "NaN", "1e30", "null", '"-5"', "[5]")},
        **{f"{name}={raw}": {"5.jsonl": ok + _dump_line(**{name: raw})}
           for name, raw in (("input", "5"), ("output", "null"), ("output", SURROGATE), ("input", SURROGATE),
                             ("score", '"high"'), ("acc", '"yes"'), ("score", "[1]"), ("score", "NaN"),
                             ("score", "Infinity"), ("score", "1e309"), ("acc", "NaN"), ("acc", "5"))},
        "duplicate score": {"5.jsonl": ok + _dump_line(score='1.0, "score": 0.0')},
        "invalid UTF-8": {"5.jsonl": ok + b'{"input": "\xc3("}\n'},
        "not JSON": {"5.jsonl": ok + b"input=x\n"}, "a JSON list": {"5.jsonl": ok + b"[]\n"},
        "nested 100,000 deep": {"5.jsonl": ok + DEEP.encode() + b"\n"},
        "not a dump": {"5.jsonl": b'{"prompt": "x"}\n'}, "a step name that is no number": {"5b.jsonl": ok},
        "a step file named past int64": {"99999999999999999999.jsonl": ok}, "float step 5.0": {"5.jsonl": ok + _dump_line(step="5.0")},
    }
    out = [Case(name, "VERL dumps", _verl(files)) for name, files in shapes.items()]
    out += [Case(f"import-verl {o} {v}", "VERL dumps", _verl({"5.jsonl": ok}, o, v))
            for o, v in (("--max-prompt-length", "0"), ("--max-response-length", "-1"), ("--follow", "0"),
                         ("--grade-workers", "abc"))]
    return out


# ----- run records and parts ----------------------------------------------------------------------------
def _made_run(folder: Path, lines: list[str] | None = None) -> Path:
    """The clean file (or ``lines``) imported (in this process: the damage cases need a real run)."""
    from pr1_eval.cli.main import main

    source = write_lines(folder / "in.jsonl", base_lines() if lines is None else lines)
    run = folder / "runs" / "r"
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        if main(["import", str(source), "--out", str(run), "--grade-workers", "0"]) != 0:
            raise SystemExit("bench: the clean import failed")
    return run


def _record_edit(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        record = json.loads((run / "run.json").read_text())
        change(record)
        (run / "run.json").write_text(json.dumps(record))
    return damage


def _bytes(data: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        (run / "run.json").write_bytes(data((run / "run.json").read_bytes()))
    return damage


def _part(change: Callable[[object], object]) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        part = next((run / "samples.parquet").glob("part-*.parquet"))
        pq.write_table(change(pq.read_table(part)), part)
    return damage


def _part_bytes(data: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        part = next((run / "samples.parquet").glob("part-*.parquet"))
        part.write_bytes(data(part.read_bytes()))
    return damage


def _set_column(name: str, values: list[object]) -> Callable[[object], object]:
    def change(table: object) -> object:
        index = table.column_names.index(name)  # type: ignore[attr-defined]
        return table.set_column(index, name, [values])  # type: ignore[attr-defined]
    return change


RECORD_DAMAGES: dict[str, Callable[[Path], None]] = {
    "k 0": _record_edit(lambda r: r.update(k=0)), "k -1": _record_edit(lambda r: r.update(k=-1)),
    "k 'four'": _record_edit(lambda r: r.update(k="four")), "task k 0": _record_edit(lambda r: r["tasks"]["t"].update(k=0)),
    "k lowered to 1": _record_edit(lambda r: (r.update(k=1), r["tasks"]["t"].update(k=1))),
    "status weird": _record_edit(lambda r: r.update(status="weird")),
    "status importing": _record_edit(lambda r: r.update(status="importing")),
    "step 10**20": _record_edit(lambda r: r["model"].update(step=10**20)),
    "step -5": _record_edit(lambda r: r["model"].update(step=-5)),
    "model a string": _record_edit(lambda r: r.update(model="m")), "tasks a list": _record_edit(lambda r: r.update(tasks=[])),
    "record_version 99": _record_edit(lambda r: r.update(record_version=99)),
    "problem_ids a string": _record_edit(lambda r: r["tasks"]["t"].update(problem_ids="p0")),
    "not UTF-8 (random bytes)": _bytes(lambda b: bytes(random.Random(0).randrange(256) for _ in range(300))),
    "one 0xff byte": _bytes(lambda b: b[:-2] + b"\xff}"), "nested 100,000 deep": _bytes(lambda b: DEEP.encode()),
    "cut short": _bytes(lambda b: b[: len(b) // 2]), "empty": _bytes(lambda b: b""), "a JSON list": _bytes(lambda b: b"[]"),
    "duplicate status key": _bytes(lambda b: b.replace(b'"status": "complete"', b'"status": "complete", "status": "running"')),
    "part: correct column missing": _part(lambda t: t.drop(["correct"])),  # type: ignore[attr-defined]
    "part: sample_idx negative": _part(_set_column("sample_idx", [-1, 1, 0, 1])),
    "part: truncated": _part_bytes(lambda b: b[: len(b) // 3]), "part: empty": _part_bytes(lambda b: b""),
    "part: 16 bytes flipped": _part_bytes(lambda b: b[:200] + bytes(x ^ 0xFF for x in b[200:216]) + b[216:]),
}
READERS = {"report": ["report", "{run}", "--json"], "leaderboard": ["leaderboard", "{run}", "--json"],
           "analyze": ["analyze", "{run}", "--no-embeddings", "--json", "--out", "{out}"]}


def _reading(damage: Callable[[Path], None], argv: list[str]) -> Build:
    def build(folder: Path) -> tuple[list[str], dict[str, str]]:
        run = _made_run(folder)
        damage(run)
        return [a.format(run=run, out=folder / "analysis") for a in argv], {}
    return build


def record_cases() -> list[Case]:
    return [Case(f"{name} ({reader})", "run.json / parts", _reading(damage, argv),
                 reader if reader != "analyze" else None)
            for name, damage in RECORD_DAMAGES.items() for reader, argv in READERS.items()]


# ----- run values, environment, other commands, output paths ---------------------------------------
def _command(argv: list[str], env: dict[str, str] | None = None, setup: Callable[[Path], None] | None = None) -> Build:
    def build(folder: Path) -> tuple[list[str], dict[str, str]]:
        if setup is not None:
            setup(folder)
        return [a.format(folder=folder) for a in argv], env or {}
    return build


RUN = ["run", "--model", "{folder}/no-model", "--tasks", "aime24", "--limit", "1", "-k", "1", "--out", "{folder}/r"]


def run_cases() -> list[Case]:
    values = [("-k", "0"), ("-k", "-1"), ("--limit", "0"), ("--temperature", "-1"), ("--temperature", "nan"),
              ("--top-p", "0"), ("--top-p", "1.5"), ("--top-k", "-5"), ("--max-new-tokens", "0"), ("--paths", "0"),
              ("--max-blocks", "0"), ("--batch-size", "0"), ("--seed", "-1"), ("--seed", str(2**70)),
              ("--problems-per-chunk", "0"), ("--tasks", "aime2024"), ("--tasks", ""), ("--prompt", "nosuch"),
              ("--shard", "3/2"), ("--shard", "x"), ("--step", "-1"), ("--gpu-memory-utilization", "2"),
              ("--tensor-parallel-size", "0"), ("--replicas", "3"), ("--engine", "nosuch"), ("--decoding", "nosuch"),
              ("--answer-policy", "nosuch"), ("--data-source", "nosuch")]
    out = [Case(f"run {o} {v}", "run values and env", _command([*RUN, o, v])) for o, v in values]
    envs = [("PR1_EVAL_PROGRESS_SECONDS", "abc"), ("PR1_EVAL_PROGRESS_SECONDS", "-1"),
            ("PR1_EVAL_PROGRESS_SECONDS", "0"), ("PR1_DATA_DIR", "/nonexistent"), ("PR1_PROMPTS_DIR", "/nonexistent"),
            ("PR1_EVAL_GRADING_WORKERS", "abc"), ("PR1_EVAL_GRADING_WORKERS", "-1")]
    out += [Case(f"run with {k}={v}", "run values and env", _command(RUN, {k: v})) for k, v in envs]
    out.append(Case("run --model missing", "run values and env", _command(RUN)))
    return out


def _runs_folder(folder: Path) -> None:
    _made_run(folder)
    (folder / "afile").write_text("x")


def other_cases() -> list[Case]:
    commands = {
        "report of no folder": ["report", "{folder}/nothing"], "report of a file": ["report", "{folder}/afile"],
        "leaderboard --baseline nosuch": ["leaderboard", "{folder}/runs", "--baseline", "nosuch"],
        "leaderboard --tasks nosuch": ["leaderboard", "{folder}/runs", "--tasks", "nosuch"],
        "analyze of no folder": ["analyze", "{folder}/nothing", "--no-embeddings", "--out", "{folder}/o"],
        "regrade of no run": ["regrade", "{folder}/nothing"],
        "regrade --answer-policy bogus": ["regrade", "{folder}/runs/r", "--answer-policy", "bogus"],
        "merge of one missing shard": ["merge", "{folder}/nothing", "--out", "{folder}/m"],
        # output paths
        "analyze --out a file": ["analyze", "{folder}/runs", "--no-embeddings", "--out", "{folder}/afile"],
        "leaderboard --html under a file": ["leaderboard", "{folder}/runs", "--html", "{folder}/afile/lb.html"],
        "leaderboard --html /proc": ["leaderboard", "{folder}/runs", "--html", "/proc/lb.html"],
        "analyze --out under /proc": ["analyze", "{folder}/runs", "--no-embeddings", "--out", "/proc/pr1-bench"],
        "leaderboard --html RUN/run.json": ["leaderboard", "{folder}/runs", "--html", "{folder}/runs/r/run.json"],
        "leaderboard --html a part": ["leaderboard", "{folder}/runs", "--html", "{folder}/runs/r/samples.parquet/x.html"],
        "leaderboard --html a folder": ["leaderboard", "{folder}/runs", "--html", "{folder}/runs"],
        "import --out over runs": ["import", "{folder}/in.jsonl", "--out", "{folder}/runs"],
        "import --out an existing run": ["import", "{folder}/in.jsonl", "--out", "{folder}/runs/r"],
    }
    out = [Case(name, "other commands and outputs", _command(argv, setup=_runs_folder)) for name, argv in commands.items()]
    envs = [("PR1_CACHE", "{folder}/afile"), ("PR1_CACHE", "/dev/null"), ("PR1_LOADER_CACHE", "{folder}/afile"),
            ("PR1_ANALYSIS_CACHE", "{folder}/afile"), ("PR1_ANALYSIS_WORKERS", "abc"), ("PR1_ANALYSIS_WORKERS", "-1"),
            ("PR1_ANALYSIS_WORKERS", "0"), ("PR1_ANALYSIS_WORKERS", "1e3")]
    for key, value in envs:
        def build(folder: Path, key: str = key, value: str = value) -> tuple[list[str], dict[str, str]]:
            _runs_folder(folder)
            return (["analyze", str(folder / "runs"), "--no-embeddings", "--json", "--out", str(folder / "o")],
                    {key: value.format(folder=folder)})
        out.append(Case(f"analyze with {key}={value.replace('{folder}/', '')}", "environment", build))
    return out


def all_cases(small: bool = False) -> list[Case]:
    from bench_malformed_endpoint import KEY, endpoint_cases
    from bench_malformed_replay import round_six_cases

    def six(name: str, source: str, build: Build, *, refuse: bool = False, note: str | None = None) -> Case:
        return Case(name, source, build, meant=None, refuse=refuse, note=note)

    def endpoint(name: str, source: str, build: Build, *, refuse: bool,
                 check: Callable[[Path], str | None] | None) -> Case:
        return Case(name, source, build, meant=None, refuse=refuse, check=check, secret=KEY)

    return [*import_cases(), *lm_eval_cases(), *verl_cases(), *record_cases(), *run_cases(), *other_cases(),
            *(c for c in round_six_cases(six, small) if isinstance(c, Case)),
            *(c for c in endpoint_cases(endpoint, small) if isinstance(c, Case))]


#: Round six's sources (bench_malformed_replay): a smaller random sample each in CI, beside their musts.
ROUND_SIX = {"replay specs", "replay --authors CSVs", "replay --html targets", "Parallel-Probe files",
             "analyze tag structures"}


def sample(cases: list[Case], seed: int, per_source: int = 6) -> list[Case]:
    """A fixed sample of every source for CI, the audit's traceback shapes always among them."""
    must = ("nested 100,000 deep", "not UTF-8", "one 0xff byte", "--batch-size 0", "a file", "duplicate gold",
            "k lowered", "sc@99999999", "RUN/run.json", "a FIFO", "a link to /dev/zero", "one block of many paths")
    rng = random.Random(seed)
    chosen: list[Case] = [c for c in cases if any(m in c.name for m in must) and "(analyze)" not in c.name]
    for source in dict.fromkeys(c.source for c in cases):
        pool = [c for c in cases if c.source == source and c not in chosen and "(analyze)" not in c.name]
        chosen += rng.sample(pool, min(per_source if source not in ROUND_SIX else 3, len(pool)))
    return chosen


# ----- helpers for the cache and kill checks ---------------------------------------------------------
def two_runs(root: Path) -> dict[str, Path]:
    """Two different runs (a: the clean file; b: three other problems, one sample each), for the cache checks."""
    return {"a": _made_run(root / "a"), "b": _made_run(root / "b", [line(f"q{i}", 0, "1") for i in range(3)])}


def _entries(cache: Path) -> list[Path]:
    outputs = cache / "analysis" / "outputs"
    return sorted((p for p in outputs.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime) if outputs.is_dir() else []


def _swap_entries(cache: Path) -> None:
    """The entry of one analysis copied over the other's (audit N4)."""
    entries = _entries(cache)
    if len(entries) >= 2:
        shutil.rmtree(entries[0])
        shutil.copytree(entries[-1], entries[0])


def _each_file(cache: Path, change: Callable[[bytes], bytes], pattern: str = "*") -> None:
    for path in sorted(cache.rglob(pattern)):
        if path.is_file():
            path.write_bytes(change(path.read_bytes()))


CACHE_DAMAGES: list[tuple[str, Callable[[Path], None]]] = [
    ("loader entries truncated", lambda c: _each_file(c / "loader", lambda b: b[: len(b) // 2])),
    ("an entry copied from another analysis", _swap_entries),
    ("every entry.json truncated", lambda c: _each_file(c, lambda b: b[: len(b) // 2], "entry.json")),
    ("16 bytes flipped in every cache file", lambda c: _each_file(c, lambda b: b[:64] + bytes(x ^ 0xFF for x in b[64:80]) + b[80:])),
    ("every cache file emptied", lambda c: _each_file(c, lambda b: b"")),
]


def big_import(root: Path, problems: int) -> Path:
    """An import file of ``problems`` x 2 rows, for the kill checks."""
    lines = [line(f"q{p}", i, "1" if i else "2") for p in range(problems) for i in range(2)]
    return write_lines(root / "big.jsonl", lines)


def stored_rows(run: Path) -> int:
    """Rows stored in a run's parts, read straight with pyarrow (0 when none)."""
    parts = sorted((run / "samples.parquet").glob("part-*.parquet")) if (run / "samples.parquet").is_dir() else []
    return sum(pq.read_metadata(p).num_rows for p in parts)
