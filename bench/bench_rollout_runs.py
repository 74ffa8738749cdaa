"""Benchmark: what repro's rollout writer costs on disk and in time, per row and for a 300-step job.

One training step of ``--rows`` rollouts (512 prompts × 8 at full size) goes through
:class:`repro.rollouts.runs.RolloutRunWriter` exactly as the reward workers hand it over (chunks of
``--chunk``, then the compaction when the step is complete). Responses are real Parallel-R1
traces (``parallel_gsm8k.jsonl`` from the training folder), distinct traces joined until a
response reaches ``--tokens`` words (about tokens: the traces are English and arithmetic), so
parquet's compression sees text as varied as a job's, not one trace repeated. Prints bytes per
row on disk (the step's folder: part, run.json, ledger) and what 300 × 4,096 rows cost with
every group kept and with ``every`` = 2, 4, 8.

    .venv/bin/python bench/bench_rollout_runs.py [--rows 4096] [--tokens 1500] [--training-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pr1_eval.grading.annotate import annotate_structure  # noqa: E402
from pr1_eval.inputs.paths import resolve_training_dir  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
from pr1_eval.records.sample import SampleRecord  # noqa: E402
from repro.rollouts.records import Rollout  # noqa: E402
from repro.rollouts.runs import RolloutRunsOptions, RolloutRunWriter  # noqa: E402

FULL_ROWS = 300 * 4096


def responses(training_dir: Path, words: int, count: int, seed: int = 0) -> list[tuple[str, str, str]]:
    """(problem, gold, response of about ``words`` words) from distinct real traces."""
    traces = [json.loads(line) for line in (training_dir / "parallel_gsm8k.jsonl").open(encoding="utf-8")]
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        picked, n = [], 0
        for trace in rng.sample(traces, len(traces)):
            picked.append(trace["response"])
            n += len(trace["response"].split())
            if n >= words:
                break
        head = traces[rng.randrange(len(traces))]
        out.append((head["problem"], str(head["answer"]), "\n\n".join(picked)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--n", type=int, default=8, help="rollouts per prompt")
    parser.add_argument("--tokens", type=int, default=1500, help="words per response (about its tokens)")
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--training-dir", default=None)
    args = parser.parse_args()
    training_dir = Path(args.training_dir) if args.training_dir else resolve_training_dir()
    if training_dir is None:  # a fresh clone has no training folder: the tests' slice of the same file
        training_dir = FIXTURES
        print(f"no training folder (PR1_TRAINING_DIR): traces from the test slice {FIXTURES / 'parallel_gsm8k.jsonl'}")
    texts = responses(training_dir, args.tokens, args.rows)
    root = Path(tempfile.mkdtemp(prefix="bench-rollout-runs-"))
    opts = RolloutRunsOptions(root=root, job="bench", train_rows=args.rows, train_n=args.n, val_rows=None,
                              val_n=1, chunk=args.chunk, max_wait_s=3600.0, response_budget=3000)
    writer = RolloutRunWriter(opts, attempt="bench", background=False)
    start = time.perf_counter()
    for i, (problem, gold, text) in enumerate(texts):
        record = annotate_structure(SampleRecord(
            task="dapo_math_17k", problem_id=f"dapo-{i // args.n}", sample_idx=0, problem=problem, gold=gold,
            response=text, n_prompt_tokens=400, n_response_tokens=len(text.split()), finish_reason="stop",
            reward=1.0, reward_acc=True, correct=True, correct_paper=True, grade_status="ok",
            reward_info=json.dumps({"acc_reward": 1.0, "format_ok": 1.0, "format_official": 1.0,
                                    "format_strict": 1.0, "has_parallel": 1.0, "step": 1.0, "tiered_active": 0.0})))
        writer.add(Rollout("train", 1, f"u{i // args.n}", i % args.n, record))
        if (i + 1) % args.chunk == 0:
            writer.flush()
    writer.close()
    seconds = time.perf_counter() - start
    step = writer.run_dir("train", 1)
    size = sum(p.stat().st_size for p in step.rglob("*") if p.is_file())
    text_bytes = sum(len(t.encode()) for _, _, t in texts) / len(texts)
    per_row = size / args.rows
    print(f"{args.rows} rows, responses {text_bytes / 1e3:.1f} KB of text on average; written in {seconds:.1f} s "
          f"({args.rows / seconds:.0f} rows/s, compaction included)")
    print(f"on disk: {size / 1e6:.1f} MB = {per_row / 1e3:.2f} KB/row")
    for every in (1, 2, 4, 8):
        print(f"300 steps x 4,096 rows, every={every}: {per_row * FULL_ROWS / every / 1e9:.1f} GB")


if __name__ == "__main__":
    main()
