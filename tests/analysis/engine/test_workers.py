"""The analysis's worker processes change where the work runs, never what it gives: an analysis
with workers equals one without, table for table, with chunks small enough that every stage
(parse, conclusions, BLEU, CSV) is split over several calls and both workers."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import analysis.pipeline.output
import analysis.pipeline.scheduled
from analysis.engine.workers import ANALYSIS_POOL, WORKER_NICENESS, WORKERS_ENV, Chunked, analysis_workers
from analysis.pipeline.output import CsvBegun, write_csv, write_tables
from analysis.runs.loader import load_runs
from analysis.summary import ANALYSIS_COLUMNS, analyze, to_json
from pr1_eval.errors import Pr1EvalError
from pr1_eval.processes import default_workers
from tests.support.analysis_fixtures import block, make_record, response, write_run
from tests.support.processes import alive

_WORDS = ["so", "x", "=", "we", "get", "7", "12", "\\frac{m}{n}", "x^2", "then", "5", "area", "Final Answer: 3"]


def _path(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 14)))


def _sweep(root: Path) -> Path:
    """Three runs whose responses hold one or two blocks of two to four random paths (some none)."""
    rng = random.Random(5)
    for step in (10, 20, 30):
        records = []
        for problem in range(8):
            for sample in range(4):
                blocks = [block([_path(rng) for _ in range(rng.randint(2, 4))]) for _ in range(rng.randint(0, 2))]
                text = response(_path(rng), *blocks, _path(rng), final=str(rng.randint(1, 4)))
                records.append(make_record("amc23", f"p{problem}", sample, text, correct=rng.random() < 0.5))
        write_run(root / "runs", f"ck{step}", records, model=f"/ck/e/global_step_{step}/hf")
    return root / "runs"


def _pid(_: int) -> int:
    return os.getpid()


def test_an_analysis_with_workers_equals_one_without(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PR1_LOADER_CACHE", "off")
    monkeypatch.setenv("PR1_ANALYSIS_CACHE", "off")
    monkeypatch.setattr(analysis.pipeline.scheduled, "BLEU_CHUNK", 16)
    monkeypatch.setattr(analysis.pipeline.scheduled, "CONCLUDE_CHUNK", 8)
    runs = _sweep(tmp_path)
    here = analyze(load_runs([runs], tokenizer=None, columns=ANALYSIS_COLUMNS))
    with analysis_workers(2) as workers:
        assert workers is not None
        pids = {workers.submit(_pid, i).result() for i in range(40)}
        there = analyze(load_runs([runs], tokenizer=None, columns=ANALYSIS_COLUMNS, workers=workers), workers=workers)
    assert os.getpid() not in pids
    assert len(here.pairs) > 5 * 16 and here.blocks["path_texts"].map(len).sum() > 5 * 8  # several chunks each
    assert to_json(there) == to_json(here)
    for name, table in here.tables().items():
        pd.testing.assert_frame_equal(there.tables()[name], table, obj=name)


def test_csv_made_in_workers_is_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PR1_LOADER_CACHE", "off")
    monkeypatch.setenv("PR1_ANALYSIS_CACHE", "off")
    monkeypatch.setattr(analysis.pipeline.output, "CSV_CHUNK", 7)
    result = analyze(load_runs([_sweep(tmp_path)], tokenizer=None, columns=ANALYSIS_COLUMNS))
    with analysis_workers(2) as workers:
        write_tables(result, tmp_path / "out", workers)
    for name, table in result.tables().items():
        write_csv(table, tmp_path / f"{name}.csv")
        assert (tmp_path / "out" / f"{name}.csv").read_bytes() == (tmp_path / f"{name}.csv").read_bytes(), name
    assert len(result.blocks) > 3 * 7
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        f"{name}.{suffix}" for name in result.tables() for suffix in ("csv", "parquet"))  # no part file is left


def test_csv_begun_during_the_analysis_is_that_of_the_tables_written(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The big tables' CSV starts as analyze makes each; a table begun for another frame (here a
    stale one) is not used: the file is that of the frame written."""
    monkeypatch.setenv("PR1_LOADER_CACHE", "off")
    monkeypatch.setenv("PR1_ANALYSIS_CACHE", "off")
    monkeypatch.setattr(analysis.pipeline.output, "CSV_CHUNK", 7)
    loaded = load_runs([_sweep(tmp_path)], tokenizer=None, columns=ANALYSIS_COLUMNS)
    told: list[str] = []
    with analysis_workers(2) as workers:
        begun = CsvBegun(workers, tmp_path / "out")
        result = analyze(loaded, workers=workers, on_table=lambda name, table: told.append(name) or begun.begin(name, table))
        begun.begin("runs", result.runs.head(1))  # not the frame written
        write_tables(result, tmp_path / "out", workers, begun)
    assert told == ["responses", "pairs", "blocks"]  # each as soon as it is final
    for name, table in result.tables().items():
        write_csv(table, tmp_path / f"{name}.csv")
        assert (tmp_path / "out" / f"{name}.csv").read_bytes() == (tmp_path / f"{name}.csv").read_bytes(), name
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]


def _die(_: int) -> int:
    os._exit(9)


def test_a_worker_that_dies_is_reported_with_the_fix() -> None:
    with pytest.raises(Pr1EvalError, match=f"worker process died.*memory.*{WORKERS_ENV}=1"), \
            analysis_workers(2) as workers:
        assert workers is not None
        [workers.submit(_die, i).result() for i in (1, 2)]


def _niceness(_: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


def test_workers_yield_the_cpu_to_the_process_that_forked_them() -> None:
    here = os.getpriority(os.PRIO_PROCESS, 0)
    with analysis_workers(2) as workers:
        assert workers is not None
        there = {workers.submit(_niceness, i).result() for i in range(4)}
    assert there == {min(here + WORKER_NICENESS, 19)}  # the kernel caps niceness at 19


def test_one_worker_means_this_process() -> None:
    with analysis_workers(1) as workers:
        assert workers is None


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_a_bad_worker_count_is_refused_with_the_fix(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WORKERS_ENV, value)
    with pytest.raises(Pr1EvalError, match=f"{WORKERS_ENV}=.*positive integer.*unset it"):
        default_workers(ANALYSIS_POOL)
    monkeypatch.setenv(WORKERS_ENV, "3")
    assert default_workers(ANALYSIS_POOL) == 3


def _pids(items: list[int]) -> list[tuple[int, int]]:
    return [(item, os.getpid()) for item in items]


def test_chunks_are_handed_out_as_they_fill_and_come_back_in_order() -> None:
    items = list(range(1001))
    with analysis_workers(2) as workers:
        chunks = Chunked(workers, _pids, 50)
        for item in items[:100]:
            chunks.add(item)
        assert len(chunks._futures) == 2  # two full chunks are already out, before the rest is added
        for item in items[100:]:
            chunks.add(item)
        there = chunks.results(lambda batch: pytest.fail("every chunk ran in a worker"))
        few = Chunked(workers, _pids, 50)
        for item in items[:40]:
            few.add(item)
        here = few.results()
    assert [item for item, _ in there] == items and os.getpid() not in {pid for _, pid in there}
    assert here == [(item, os.getpid()) for item in items[:40]]  # fewer than a chunk: run here
    alone = Chunked(None, _pids, 50)
    for item in items:
        alone.add(item)
    assert alone.results() == [(item, os.getpid()) for item in items]


_FAULTS_OF_BLEU_BATCHES = """
import random, resource, sys
if sys.argv[1] == "keep":
    from analysis.engine.workers import keep_freed_memory
    assert keep_freed_memory()
from analysis.diversity import bleu_counts
# the batches that allocate the most: raw tokens by pyarrow, ids laid out by numpy (as where numba cannot
# load). The compiled token kernel allocates little per batch, and glibc's own moving mmap threshold then
# reuses some of it by chance: 60 to 510 faults against 51 kept, a margin too thin to decide on
bleu_counts._token_kernels = lambda: None
from analysis.diversity.bleu import batch_bleu_here
rng = random.Random(0)
words = [f"w{i}" for i in range(300)] + list("0123456789+=$")
texts = [" ".join(rng.choice(words) for _ in range(rng.randint(100, 400))) for _ in range(4000)]
pairs = list(zip(texts[0::2], texts[1::2], strict=True)) * 4
batch_bleu_here(pairs[:2048])  # the first batch faults its memory in either way
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for start in range(0, len(pairs), 2048):
    batch_bleu_here(pairs[start:start + 2048])
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_memory_is_reused_not_faulted_in_again() -> None:
    def faults(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", _FAULTS_OF_BLEU_BATCHES, mode], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).resolve().parents[3])
        return int(done.stdout)

    default, kept = faults("default"), faults("keep")
    # BLEU's batches reuse their arrays' memory instead: 920-1,430 faults against 9,300-12,900 in six
    # draws each (2026-12-07); the rest are Python's own small-object arenas, which mallopt does not govern
    assert kept * 3 < default * 2, (kept, default)


def test_csv_parts_never_written_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An analysis that fails after its CSV was begun (``close`` without writing) leaves no part file."""
    monkeypatch.setattr(analysis.pipeline.output, "CSV_CHUNK", 3)
    table = pd.DataFrame({"x": range(20), "texts": [["a", "b"]] * 20})
    with analysis_workers(2) as workers:
        begun = CsvBegun(workers, tmp_path / "out")
        assert len(begun.begin("blocks", table)) == 7
        assert [p.name for p in (tmp_path / "out").iterdir()][0].startswith(".csv-parts-")
        begun.close()
    assert list((tmp_path / "out").iterdir()) == []


_ANALYZE_THAT_HANGS = """
import sys, time
import analysis.command
def hang(*args, **kwargs):
    print("analyzing", flush=True)
    time.sleep(300)
analysis.command._analyze_with = hang  # the workers are forked by then, as in a real analysis
from pr1_eval.cli.main import main
main(["analyze", sys.argv[1], "--no-embeddings", "--out", sys.argv[2]])
"""


def _children(pid: int) -> set[int]:
    kids: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids |= {int(child) for child in (task / "children").read_text().split()}
    return kids


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc for the children")
def test_a_killed_analyze_leaves_no_worker_behind(tmp_path: Path) -> None:
    """SIGKILL to ``analyze`` (the OOM killer, a timeout, a restarted kernel) runs no cleanup; its
    forked workers end with it instead of idling on (the audit counted 12 of 12 alive after 8 s)."""
    runs = _sweep(tmp_path)
    env = {**os.environ, WORKERS_ENV: "3", "PR1_CACHE": "off"}
    analyze = subprocess.Popen([sys.executable, "-c", _ANALYZE_THAT_HANGS, str(runs), str(tmp_path / "out")],
                               stdout=subprocess.PIPE, text=True, env=env, cwd=Path(__file__).resolve().parents[3])
    try:
        assert analyze.stdout is not None and analyze.stdout.readline() == "analyzing\n"
        workers = _children(analyze.pid)
        assert len(workers) == 3 and all(alive(pid) for pid in workers)
    finally:
        analyze.kill()
        analyze.wait()
    deadline = time.monotonic() + 5.0
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in workers if alive(pid)]
    for pid in left:  # so a failure leaves nothing running either
        os.kill(pid, 9)
    assert not left


class _CountingPool:
    def __init__(self) -> None:
        self.started = 0

    def start(self) -> None:
        self.started += 1


@pytest.mark.parametrize(("n_texts", "with_workers", "starts"), [
    (analysis.pipeline.scheduled.CONCLUDE_CHUNK, True, 1),  # a full chunk goes to the workers
    (analysis.pipeline.scheduled.CONCLUDE_CHUNK - 1, True, 0),  # less than a chunk: read here, the grader as before
    (10 * analysis.pipeline.scheduled.CONCLUDE_CHUNK, False, 0),  # no workers: nothing runs beside it
])
def test_the_grader_starts_while_the_workers_read_the_conclusions(
        n_texts: int, with_workers: bool, starts: int, monkeypatch: pytest.MonkeyPatch) -> None:
    pool = _CountingPool()
    monkeypatch.setattr(analysis.pipeline.scheduled, "shared_pool", lambda: pool)
    with analysis_workers(2 if with_workers else 1) as workers:
        analysis.pipeline.scheduled.start_grading_early(n_texts, workers)
    assert pool.started == starts
