"""lm-eval's real evaluator (repeats, filter, hooks, aggregation, ``--log_samples`` files) with a
canned model whose answers are known, so the equality with ``pr1-eval report`` is checked on
non-trivial numbers in seconds.

The tiny model in ``tests/pr1_eval/lm_eval_tasks/test_cli.py`` cannot solve AIME, so there every correctness metric
is 0 on both sides; here some problems are partly right, some right in equivalent forms, one has
no answer, and the majority is right on one problem and wrong on another.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from lm_eval.api.model import LM  # noqa: E402

from pr1_eval.inputs.paths import packaged_benchmarks_dir  # noqa: E402
from pr1_eval.lm_eval_tasks import include_path  # noqa: E402

BENCH = packaged_benchmarks_dir()  # the benchmarks shipped in the package (a fresh clone has no data folder)
METRICS = ["mean@K", "pass@1", "pass@K", "best@K", "maj@K", "mean@K_paper", "best@K_paper", "parallel_ratio"]
BLOCK = "<Parallel>\n<Path>\na\n</Path>\n<Path>\nb\n</Path>\n</Parallel>\n<Summary>\ns\n</Summary>\n"


def canned(doc_index: int, gold: str, j: int) -> str:
    """Sample ``j`` of problem ``doc_index``: 0 → 5 right, 11 the same wrong answer (majority
    wrong); 1 → all right, half written ``N.0`` (majority right); 2 → 8 without an answer, 8 wrong.
    Every fourth sample opens a parallel block."""
    wrong = str(int(gold) + 1)
    answer: str | None
    if doc_index == 0:
        answer = gold if j < 5 else wrong
    elif doc_index == 1:
        answer = gold if j % 2 else f"{gold}.0"
    else:
        answer = None if j < 8 else wrong
    body = (BLOCK if j % 4 == 0 else "") + "Working.\n"
    return body + ("I am not sure." if answer is None else f"\nFinal Answer: {answer}")


class CannedLM(LM):
    """Answers each clone of a prompt from :func:`canned`, in the order lm-eval asks."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: Counter[str] = Counter()
        self.order: dict[str, int] = {}

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        out = []
        for request in requests:
            doc = request.doc
            index = self.order.setdefault(doc["problem_id"], len(self.order))
            out.append(canned(index, doc["gold"], self.asked[doc["problem_id"]]))
            self.asked[doc["problem_id"]] += 1
        return out

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        raise NotImplementedError("generation tasks only")

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        raise NotImplementedError("generation tasks only")


def test_evaluator_metrics_equal_the_report_of_the_imported_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    from pr1_eval.ingest.importer import import_rows
    from pr1_eval.ingest.lm_eval_import import read_lm_eval_samples
    from pr1_eval.report.run_report import run_report
    from pr1_eval.store.run_store import RunStore

    monkeypatch.setenv("PR1_DATA_DIR", str(BENCH))
    tracker = EvaluationTracker(output_path=str(tmp_path / "out"))
    results = simple_evaluate(model=CannedLM(), tasks=["pr1_aime24"], limit=3, log_samples=True,
                              task_manager=TaskManager(include_path=include_path(), include_defaults=False), evaluation_tracker=tracker)
    assert results is not None
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)  # exactly what the lm_eval CLI does
    tracker.save_results_samples(task_name="pr1_aime24", samples=samples["pr1_aime24"])

    got = {name: results["results"]["pr1_aime24"][f"{name},all"] for name in METRICS}
    assert results["results"]["pr1_aime24"]["k,all"] == 16
    rows = read_lm_eval_samples(tmp_path / "out")
    assert len(rows) == 48
    frame = RunStore(import_rows(rows, tmp_path / "run", source="test")).read_frame()
    report = run_report(frame, 16).tasks["aime24"].to_json()  # the metrics under their --json names
    assert got == pytest.approx({name: report[name.replace("@K", "@16")] for name in METRICS}, abs=1e-12)
    # and both equal the hand count: c = 5, 16, 0
    assert got["mean@K"] == pytest.approx((5 / 16 + 1 + 0) / 3)
    assert got["pass@K"] == pytest.approx(2 / 3) and got["maj@K"] == pytest.approx(1 / 3)
    assert got["best@K"] == pytest.approx((1 - (11 / 16) ** 16 + 1) / 3)
    assert got["parallel_ratio"] == pytest.approx(0.25)
    assert (frame["grade_status"] == "no_answer").sum() == 8
