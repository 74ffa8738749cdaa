"""The nano job's data: the real SFT text, and RL problems with golds the tiny model can learn.

- SFT: ``parallel_gsm8k_nano.jsonl`` (packaged beside this module): 16 rows of Parallel-GSM8K, the
  16 shortest traces with a parallel block among the test fixture's slice
  (``tests/fixtures/parallel_gsm8k.jsonl``: byte-identical rows of ``shared/data/training/
  parallel_gsm8k.jsonl``), each with the official SFT text of the same id added as ``sft_answer``
  (from ``shared/data/training/parallel_gsm8k_sft.jsonl``). MIT, zhengkid/Parallel-R1 (see
  ``tests/fixtures/README.md``). sha256 :data:`SFT_SLICE_SHA256`.
- RL stages: one-digit arithmetic in the wordings the tiny model was trained on
  (:func:`pr1_eval.testing.tiny_traces.make_question`), with their *true* answers, all of them one
  target. Why one answer: the tiny model barely reads the problem (its final answers spread over
  a dozen digits whatever was asked), so the target is the answer the stage's start model earns its
  reward with most often, measured on the machine just before the stage (:mod:`repro.nano.targets`):
  from the first step some rollouts of most groups earn the reward and GRPO has something to
  reinforce. What it learns is to answer that number, not to add: the point is that the optimiser,
  the weight sync and the reward move the policy, measurably. A Parallel-GSM8K or DAPO problem
  would score 0 for every rollout and teach nothing. **Stated plainly: these are not the paper's
  RL sets**, only data on which a reward can rise. Each RL stage gets its own folder
  ``data-<stage>``; ``data/`` (placeholder golds :data:`TARGET_ANSWER`) is what the SFT stages read.

Everything is built by ``pr1-repro data`` itself (the command a GPU user runs, in a child process),
from these inputs.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
from pathlib import Path

from pr1_eval.errors import Pr1EvalError
from pr1_eval.testing.tiny_traces import make_question

SFT_SLICE = Path(__file__).resolve().parent / "parallel_gsm8k_nano.jsonl"
SFT_SLICE_SHA256 = "458140f0ce656ff1469c29c0d6559144eb4576bf0184c521efba8155e26571ab"
TARGET_ANSWER = 3


def arithmetic_rows(n: int, seed: int, prefix: str, answer: int | None = TARGET_ANSWER) -> list[dict[str, str]]:
    """``n`` distinct one-digit problems with their true answers, all equal to ``answer`` unless it is
    None (deterministic in ``seed``)."""
    rng = random.Random(seed)
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    for _ in range(100_000):
        if len(rows) == n:
            break
        question = make_question(rng)
        if question.text in seen or (answer is not None and question.answer != answer):
            continue
        seen.add(question.text)
        rows.append({"id": f"{prefix}-{len(rows)}", "problem": question.text, "answer": str(question.answer)})
    if len(rows) < n:
        raise Pr1EvalError(f"only {len(rows)} distinct one-digit problems have the answer {answer}; ask for fewer")
    return rows


def _write_jsonl(rows: list[dict[str, str]], path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def check_sft_slice() -> Path:
    """The packaged SFT slice, checked against its recorded hash (a changed slice changes the figures)."""
    if not SFT_SLICE.is_file():
        raise Pr1EvalError(f"{SFT_SLICE} is missing: reinstall pr1-eval (the file ships with repro)")
    digest = hashlib.sha256(SFT_SLICE.read_bytes()).hexdigest()
    if digest != SFT_SLICE_SHA256:
        raise Pr1EvalError(f"{SFT_SLICE} has sha256 {digest[:12]}…, not the recorded {SFT_SLICE_SHA256[:12]}…")
    return SFT_SLICE


def _pr1_repro_data(out: Path, name: str, gsm8k: Path, dapo: Path) -> Path:
    """``pr1-repro data`` on the nano inputs into ``out/name``, its output kept in ``out/logs``."""
    data_dir = out / name
    argv = [sys.executable, "-m", "repro.cli", "data", "--sft", str(check_sft_slice()), "--gsm8k", str(gsm8k),
            "--dapo", str(dapo), "--out", str(data_dir)]
    done = subprocess.run(argv, capture_output=True, text=True)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    (out / "logs" / f"{name}.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode != 0:
        raise Pr1EvalError(f"pr1-repro data failed (exit {done.returncode}) on the nano inputs of {data_dir}: "
                           f"{done.stderr.strip()[-500:]}")
    return data_dir


def build_nano_data(out: Path, *, rl_problems: int = 16, seed: int = 0) -> Path:
    """Write the SFT inputs (with placeholder RL golds :data:`TARGET_ANSWER`) and run ``pr1-repro data``
    on them into ``out/data``: the folder the SFT stages read. Returns it."""
    return build_rl_data(out, "data", TARGET_ANSWER, rl_problems=rl_problems, seed=seed)


def build_rl_data(out: Path, name: str, target: int, *, rl_problems: int = 16, seed: int = 0) -> Path:
    """``out/name`` through ``pr1-repro data``: the SFT slice, and GSM8K- and DAPO-style RL problems
    whose true answers are all ``target`` (an RL stage's gold, :mod:`repro.nano.targets`). Returns it."""
    inputs = out / "inputs" / name
    inputs.mkdir(parents=True, exist_ok=True)
    gsm8k = _write_jsonl(arithmetic_rows(rl_problems, seed, "nano-arith", answer=target), inputs / "gsm8k_nano.jsonl")
    dapo_rows = [{**r, "data_source": "math_dapo"}
                 for r in arithmetic_rows(rl_problems, seed + 1, "nano-dapo", answer=target)]
    dapo = _write_jsonl(dapo_rows, inputs / "dapo_nano.jsonl")
    return _pr1_repro_data(out, name, gsm8k, dapo)
