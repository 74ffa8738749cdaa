"""The issue's check: the ``lm_eval`` CLI (hf backend) with the tiny model on ``pr1_aime24 --limit 2``
at k = 1 (greedy), 4 and 16, in one ``lm_eval`` call.

Each k must give every document k graded samples and report metrics equal to what ``pr1-eval
report`` computes for the same generations imported from ``--log_samples``. The k = 1 and 4 tasks
are what a user writes to change k: a YAML that includes ``pr1_aime24.yaml`` and sets ``repeats``
(and, for greedy, the sampling). The generation budget is kept small so the whole test stays
within a couple of minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pr1_eval.inputs.paths import packaged_benchmarks_dir
from pr1_eval.lm_eval_tasks import include_path
from tests.support.deadlines import scaled

BENCH = packaged_benchmarks_dir()  # the benchmarks shipped in the package (a fresh clone has no data folder)
METRICS = ["mean@K", "pass@1", "pass@K", "best@K", "maj@K", "mean@K_paper", "best@K_paper", "parallel_ratio"]
MAX_GEN_TOKS = 96
#: lm-eval task → (k, extra YAML): the user's own tasks at another k, beside the shipped one (k = 16).
VARIANTS = {
    "pr1_aime24_k1": (1, "generation_kwargs:\n  until: []\n  do_sample: false\n  temperature: 0.0\n  max_gen_toks: 3000\n"),
    "pr1_aime24_k4": (4, ""),
    "pr1_aime24_k16": (16, ""),
}

pytestmark = pytest.mark.slow


def _lm_eval_command() -> list[str]:
    """The installed ``lm_eval`` console script beside this interpreter (else ``python -m lm_eval``)."""
    script = Path(sys.executable).parent / "lm_eval"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "lm_eval"]


def _write_variants(folder: Path) -> None:
    """One YAML per k in ``folder``, each including the shipped ``pr1_aime24.yaml`` (as README.md shows)."""
    shipped = Path(include_path()) / "pr1_aime24.yaml"
    for task, (k, extra) in VARIANTS.items():
        (folder / f"{task}.yaml").write_text(f"include: {shipped}\ntask: {task}\nrepeats: {k}\n{extra}")


@pytest.fixture(scope="module")
def lm_eval_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from pr1_eval.testing.tiny_model import cached_tiny_model

    model = cached_tiny_model("trained")
    root = tmp_path_factory.mktemp("lm_eval")
    tasks, out = root / "tasks", root / "out"
    tasks.mkdir()
    _write_variants(tasks)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "PR1_DATA_DIR": str(BENCH), "PR1_EVAL_GRADING_WORKERS": "1"}
    command = [*_lm_eval_command(), "--model", "hf", "--model_args", f"pretrained={model},dtype=float32",
               "--device", "cpu", "--batch_size", "32", "--include_path", str(tasks), "--tasks", ",".join(VARIANTS),
               "--limit", "2", "--apply_chat_template", "--gen_kwargs", f"max_gen_toks={MAX_GEN_TOKS}",
               "--log_samples", "--output_path", str(out)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=scaled(600), check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "overrides existing task" not in done.stdout + done.stderr  # our names do not shadow lm-eval's built-ins
    results_files = list(out.rglob("results_*.json"))
    assert len(results_files) == 1, list(out.rglob("*"))
    samples = {}
    for task in VARIANTS:
        files = list(out.rglob(f"samples_{task}_2*.jsonl"))
        assert len(files) == 1, list(out.rglob("*"))
        samples[task] = {"file": files[0], "rows": [json.loads(line) for line in files[0].read_text().splitlines()]}
    return {"out": out, "stdout": done.stdout, "results": json.loads(results_files[0].read_text()), "samples": samples}


@pytest.mark.parametrize("task", list(VARIANTS))
def test_every_document_gets_k_graded_samples(lm_eval_run: dict[str, Any], task: str) -> None:
    k, _ = VARIANTS[task]
    samples = lm_eval_run["samples"][task]["rows"]
    assert [s["doc"]["problem_id"] for s in samples] == ["aime24-0", "aime24-1"]
    for sample in samples:
        assert len(sample["resps"]) == 1 and len(sample["resps"][0]) == k
        assert sample["filtered_resps"] == sample["resps"]  # the `all` filter kept every response
        assert sample["arguments"]["gen_args_0"]["arg_0"].startswith("<|im_start|>user\n")  # chat template applied
        gen = sample["arguments"]["gen_args_0"]["arg_1"]
        assert gen["max_gen_toks"] == MAX_GEN_TOKS and gen["do_sample"] == (k > 1)
        summary = sample["mean@K"]
        assert summary["n"] == k and summary["n_unscored"] == 0 and summary["problem_id"] == sample["doc"]["problem_id"]
    assert lm_eval_run["results"]["results"][task]["k,all"] == k
    responses = [r for s in samples for r in s["resps"][0]]
    if k > 1:
        assert len(set(responses)) > 1, "all clones identical: sampling is not happening"
    assert "<|im_end|>" not in "".join(responses) and "<|endoftext|>" not in "".join(responses)


def test_the_tags_reach_the_samples(lm_eval_run: dict[str, Any]) -> None:
    responses = [r for s in lm_eval_run["samples"]["pr1_aime24_k16"]["rows"] for r in s["resps"][0]]
    assert any("<Parallel>" in r for r in responses), "the hf backend dropped the tags"


@pytest.mark.parametrize("task", list(VARIANTS))
def test_lm_eval_metrics_equal_pr1_eval_report_of_the_imported_samples(lm_eval_run: dict[str, Any], task: str,
                                                                       tmp_path: Path) -> None:
    from pr1_eval.ingest.importer import import_rows
    from pr1_eval.ingest.lm_eval_import import read_lm_eval_samples
    from pr1_eval.report.run_report import run_report
    from pr1_eval.store.run_store import RunStore

    k, _ = VARIANTS[task]
    rows = read_lm_eval_samples(lm_eval_run["samples"][task]["file"])
    assert len(rows) == 2 * k
    run = import_rows(rows, tmp_path / "run", source=str(lm_eval_run["out"]), workers=1)
    frame = RunStore(run).read_frame()
    assert frame["grade_status"].isin(["ok", "no_answer"]).all()
    assert frame.groupby("problem_id").size().to_dict() == {"aime24-0": k, "aime24-1": k}
    report = run_report(frame, k).tasks["aime24"].to_json()  # the metrics under their --json names, at this k
    lm_eval = lm_eval_run["results"]["results"][task]
    got = {name: lm_eval[f"{name},all"] for name in METRICS}
    want = {name: report[name.replace("@K", f"@{k}")] for name in METRICS}
    assert got == pytest.approx(want, abs=1e-12)
    if k == 16:
        assert report["parallel_ratio"] > 0  # the tags reached the report too


def test_pr1_eval_import_and_report_commands_print_the_same_numbers(lm_eval_run: dict[str, Any], tmp_path: Path) -> None:
    """The same equality through the commands a user types: ``pr1-eval import --format lm-eval``
    then ``pr1-eval report --json``, at k = 4."""
    env = {**os.environ, "PR1_EVAL_GRADING_WORKERS": "1"}
    pr1_eval = [sys.executable, "-m", "pr1_eval.cli.main"]
    run = tmp_path / "run"
    samples = lm_eval_run["samples"]["pr1_aime24_k4"]["file"]
    done = subprocess.run([*pr1_eval, "import", "--format", "lm-eval", str(samples), "--out", str(run)],
                          env=env, capture_output=True, text=True, timeout=scaled(300), check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = subprocess.run([*pr1_eval, "report", str(run), "--json"], env=env, capture_output=True, text=True,
                            timeout=scaled(300), check=False)
    assert report.returncode == 0, report.stderr[-3000:]
    task = json.loads(report.stdout)["tasks"]["aime24"]
    # lm_eval ran --limit 2: 2 of the packaged 30 AIME 2024 problems, reported as that part, with its numbers
    assert not task["complete"] and task["part_of"] == {"kind": "benchmark", "label": "the packaged aime24",
                                                        "held": 2, "total": 30}
    metrics = task["partial"]
    lm_eval = lm_eval_run["results"]["results"]["pr1_aime24_k4"]
    assert {name: lm_eval[f"{name},all"] for name in METRICS} == pytest.approx(
        {name: metrics[name.replace("@K", "@4")] for name in METRICS}, abs=1e-12)
