"""End to end: `pr1-eval run` with the trained tiny model, SIGKILL mid-run, report, resume.

The killed run must report itself incomplete (never a subset averaged silently), and the
resumed run must equal an uninterrupted run sample for sample: chunks of one problem and
per-request seeds make each problem's samples independent of where a run resumed.
``tests/pr1_eval/generate/test_kill_resume.py`` kills a run repeatedly.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from pr1_eval.inputs.paths import packaged_benchmarks_dir
from pr1_eval.stats.metrics import best_at_k, pass_at_k
from pr1_eval.store.run_store import RunStore
from pr1_eval.testing.tiny_model import cached_tiny_model
from tests.support.deadlines import scaled

BENCH = packaged_benchmarks_dir()  # the benchmarks shipped in the package (a fresh clone has no data folder)


def _cmd(model: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "pr1_eval.cli.main", "run", "--model", str(model), "--tasks", "aime24,gsm8k", "-k", "4",
            "--limit", "3", "--max-new-tokens", "48", "--engine", "hf", "--out", str(out), "--seed", "7",
            "--problems-per-chunk", "1", "--data-dir", str(BENCH), "--grade-workers", "1"]


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="module")
def model() -> Path:
    return cached_tiny_model("trained")


@pytest.fixture(scope="module")
def reference_run(model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "run"
    done = subprocess.run(_cmd(model, out), env=_env(), capture_output=True, text=True, timeout=scaled(600))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "mean@4" in done.stdout  # the summary table is printed at the end
    REFERENCE_STDERR.append(done.stderr)
    return out


REFERENCE_STDERR: list[str] = []


def test_progress_lines_appear_outside_a_terminal(reference_run: Path) -> None:
    """stderr is a pipe here, as in a job-array log: plain progress lines, no bar, ending at 24/24."""
    lines = [line for line in REFERENCE_STDERR[0].splitlines() if line.startswith("[pr1-eval] ")]
    assert lines[0].startswith("[pr1-eval] started: 0/24 samples"), REFERENCE_STDERR[0][-2000:]
    pattern = re.compile(r"\[pr1-eval\] (\d+)/24 samples \(\d+%\) generated, (\d+) stored, \d+ engine calls"
                         r"(?:, \d+ tokens in \d+ decoding steps \([\d.]+ tokens/s\))?; "
                         r"[\d.]+ samples/s, ETA (?:≤ )?(\w+), \w+ elapsed")
    parsed = [pattern.search(line) for line in lines[1:]]
    assert all(parsed), lines
    assert [int(m.group(2)) for m in parsed if m] == sorted(int(m.group(2)) for m in parsed if m)  # stored only grows
    last = parsed[-1]
    assert last is not None and (last.group(1), last.group(2), last.group(3)) == ("24", "24", "0s")
    assert "samples:" not in REFERENCE_STDERR[0]  # no tqdm bar ("samples:  50%|…") written into a log


def _report(run: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pr1_eval.cli.main", "report", str(run), *flags], env=_env(),
                          capture_output=True, text=True, timeout=scaled(120))


def test_killed_run_reports_incomplete_then_resumes_to_the_uninterrupted_run(model: Path, reference_run: Path,
                                                                            tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(_cmd(model, out), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + scaled(300)
    while time.time() < deadline and len(RunStore(out).part_paths()) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    parts_at_kill = len(RunStore(out).part_paths())
    assert 2 <= parts_at_kill < 6, "the kill should land mid-run"

    killed = json.loads(_report(out, "--json").stdout)
    assert killed["complete"] is False and killed["status"] == "running"
    missing = {task: m["missing_problems"] for task, m in killed["tasks"].items()}
    assert set(missing) == {"aime24", "gsm8k"}  # a task that never started is listed, not dropped
    assert sum(len(ids) for ids in missing.values()) == 6 - parts_at_kill  # one problem per part
    assert not any("mean@4" in m for m in killed["tasks"].values() if not m["complete"])
    table = _report(out)
    assert table.returncode == 0 and "INCOMPLETE" in table.stdout and not table.stdout.startswith("\n")
    assert "rerun the run's command" in table.stdout
    strict = _report(out, "--strict")
    assert strict.returncode == 2 and "incomplete (--strict)" in strict.stderr and "Traceback" not in strict.stderr

    resumed = subprocess.run(_cmd(model, out), env=_env(), capture_output=True, text=True, timeout=scaled(600))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    done = 4 * parts_at_kill  # one problem of k = 4 per part
    assert f"resuming {out}: {done} of 24 samples already done" in resumed.stderr, resumed.stderr[-3000:]
    assert f"{24 - done} left" in resumed.stderr
    first = next(line for line in resumed.stderr.splitlines() if line.startswith("[pr1-eval] "))
    assert first.startswith(f"[pr1-eval] resumed: 0/{24 - done} samples (0%) generated this session ({done} stored "
                            "before it)"), first
    got = RunStore(out).read_frame()  # raises on duplicated keys
    want = RunStore(reference_run).read_frame()
    assert len(got) == len(want) == 2 * 3 * 4
    key = ["task", "problem_id", "sample_idx"]
    merged = got.merge(want, on=key, suffixes=("", "_ref"))
    assert len(merged) == 24
    assert (merged["response"] == merged["response_ref"]).all()
    assert (merged["correct"].astype(str) == merged["correct_ref"].astype(str)).all()
    assert _report(out, "--strict").returncode == 0


def test_run_json_records_what_replays_the_run(reference_run: Path) -> None:
    info = json.loads((reference_run / "run.json").read_text())
    assert info["status"] == "complete" and info["k"] == 4 and info["seed"] == 7
    assert info["sampling"]["temperature"] == 1.0 and info["sampling"]["max_new_tokens"] == 48
    assert info["prompt"]["name"] == "parallel_r1_v3" and len(info["prompt"]["sha256"]) == 64
    assert set(info["tasks"]) == {"aime24", "gsm8k"} and len(info["tasks"]["aime24"]["data_hash"]) == 64
    assert info["tasks"]["aime24"]["problem_ids"] == ["aime24-0", "aime24-1", "aime24-2"]
    assert info["tasks"]["gsm8k"]["k"] == 4 and info["tasks"]["gsm8k"]["n_problems"] == 3
    assert info["engine"]["backend"] == "hf" and info["packages"]["torch"]
    assert info["decoding"]["mode"] == "sequential"


def test_report_json_recomputed_independently_from_parquet(reference_run: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pr1_eval.cli.main", "report", str(reference_run), "--json"],
                          env=_env(), capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    frame = pd.read_parquet(reference_run / "samples.parquet")
    for task, group in frame.groupby("task"):
        counts = group.groupby("problem_id")["correct"].apply(lambda s: int(s.fillna(False).astype(bool).sum()))
        m = report["tasks"][task]
        assert m["n_problems"] == 3 and m["n_samples"] == 12
        assert m["mean@4"] == pytest.approx(sum(c / 4 for c in counts) / 3)
        assert m["pass@4"] == pytest.approx(sum(pass_at_k(4, c, 4) for c in counts) / 3)
        assert m["best@4"] == pytest.approx(sum(best_at_k(4, c, 4) for c in counts) / 3)
        paper = group.groupby("problem_id")["correct_paper"].apply(lambda s: int(s.fillna(False).astype(bool).sum()))
        assert m["mean@4_paper"] == pytest.approx(sum(c / 4 for c in paper) / 3)
        assert m["best@4_paper"] == pytest.approx(sum(best_at_k(4, c, 4) for c in paper) / 3)
        assert m["parallel_ratio"] == pytest.approx(group["has_parallel"].mean())
        assert m["complete"] and m["missing_problems"] == [] and m["n_problems_expected"] == 3
        assert set(m["ci95"]) == {"mean@4", "pass@4", "best@4", "maj@4", "mean@4_paper", "best@4_paper"}
    assert report["complete"] and report["status"] == "complete"


def test_responses_keep_tags_and_structure_columns_agree(reference_run: Path) -> None:
    frame = pd.read_parquet(reference_run / "samples.parquet")
    with_blocks = frame[frame["has_parallel"]]
    assert len(with_blocks) > 0, "the trained tiny model should branch"
    assert with_blocks["response"].str.contains("<Parallel>", regex=False).all()
    assert (frame["n_blocks"] == frame["response"].str.count("<Parallel>")).all()
    assert (with_blocks["position_unit"] == "token").all()


def test_rerun_with_other_settings_is_refused(model: Path, reference_run: Path) -> None:
    cmd = _cmd(model, reference_run)
    cmd[cmd.index("--seed") + 1] = "8"
    done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=scaled(300))
    assert done.returncode == 2 and "different settings" in done.stderr and "Traceback" not in done.stderr


def test_model_dir_without_tokenizer_is_a_clear_error(tmp_path: Path, model: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text((model / "config.json").read_text())
    done = subprocess.run([sys.executable, "-m", "pr1_eval.cli.main", "run", "--model", str(tmp_path / "m"), "--tasks", "aime24",
                           "--engine", "hf", "--data-dir", str(BENCH), "--out", str(tmp_path / "o")],
                          env=_env(), capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 2 and "tokenizer" in done.stderr and "Traceback" not in done.stderr
