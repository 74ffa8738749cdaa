"""The nano job's data: the real SFT text, and RL problems with golds the tiny model can learn.

- SFT: ``parallel_gsm8k_nano.jsonl`` (packaged beside this module): 16 rows of Parallel-GSM8K, the
  16 shortest traces with a parallel block among the test fixture's slice
  (``tests/fixtures/parallel_gsm8k.jsonl``: byte-identical rows of ``shared/data/training/
  parallel_gsm8k.jsonl``), each with the official SFT text of the same id added as ``sft_answer``
  (from ``shared/data/training/parallel_gsm8k_sft.jsonl``). MIT, zhengkid/Parallel-R1 (see
  ``tests/fixtures/README.md``). sha256 :data:`SFT_SLICE_SHA256`.
- RL, Seen stages (GSM8K, DAPO): one-digit arithmetic in the wordings the tiny model was trained on
  (:func:`pr1_eval.testing.tiny_traces.make_question`), with their *true* answers, all of them
  :data:`TARGET_ANSWER`. Why that one answer: the tiny model barely reads the problem (it is right
  on about 5 % of one-digit problems, its final answers spread over a few digits whatever was
  asked), so the target is the answer the start model gets right most often on problems whose
  answer it is: from the first step some rollouts of most groups earn the reward and GRPO has
  something to reinforce. What it learns is to answer 3, not to add: the point is that the
  optimiser, the weight sync and the reward move the policy, measurably. A Parallel-GSM8K or DAPO
  problem would score 0 for every rollout and teach nothing. **Stated plainly: these are not the
  paper's RL sets**, only data on which a reward can rise.
- RL, Unseen stages: the same kind of problems in ``data-unseen/`` (:data:`UNSEEN_DATA`), all with
  the answer :data:`UNSEEN_TARGET_ANSWER`, chosen the same way for the ``trained-structured`` model
  sampled as the Unseen stages sample it (fork-join, 96-token responses, paths capped at 24).

How the targets were measured (temperature 1, problems from :func:`arithmetic_rows` whose true answer
is the candidate, the reward's own rule, :func:`repro.rewards.judge`):

| start model, decoding | target: share right |
|---|---|
| ``seen-sft`` checkpoint of the CI slice, sequential, 128 rollouts each | 3: 10.9 %, 2: 9.4 %, 4: 7.0 % |
| ``trained-structured``, fork-join, 384 rollouts (2, 3, 6) or 256 (4, 5, 7, 8) | 2: 6.5 %, 4: 7.0 %, 5: 7.0 %, 3: 4.7 %, 7: 5.1 %, 8: 5.1 %, 6: 3.6 % |

2, 4 and 5 are within noise of each other for the structured model; 2 was the best of the first
384 rollouts and is kept. ``tests/repro/test_nano_checks.py`` pins that each start model still
gets its target right often enough to learn.

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
UNSEEN_TARGET_ANSWER = 2
UNSEEN_DATA = "data-unseen"


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
    """Write the training inputs and run ``pr1-repro data`` on them: ``out/data`` for the Seen stages
    (golds :data:`TARGET_ANSWER`), ``out/data-unseen`` for the Unseen ones (RL golds
    :data:`UNSEEN_TARGET_ANSWER`; the same SFT rows). Returns the Seen folder."""
    inputs = out / "inputs"
    inputs.mkdir(parents=True, exist_ok=True)
    gsm8k = _write_jsonl(arithmetic_rows(rl_problems, seed, "nano-arith"), inputs / "gsm8k_nano.jsonl")
    dapo_rows = [{**r, "data_source": "math_dapo"} for r in arithmetic_rows(rl_problems, seed + 1, "nano-dapo")]
    dapo = _write_jsonl(dapo_rows, inputs / "dapo_nano.jsonl")
    unseen_rows = [{**r, "data_source": "math_dapo"}
                   for r in arithmetic_rows(rl_problems, seed + 1, "nano-unseen", answer=UNSEEN_TARGET_ANSWER)]
    unseen = _write_jsonl(unseen_rows, inputs / "unseen_nano.jsonl")
    _pr1_repro_data(out, UNSEEN_DATA, gsm8k, unseen)
    return _pr1_repro_data(out, "data", gsm8k, dapo)
