"""Two fork-join checkpoints whose path lengths are known by construction, written through the run
store as ``pr1-eval run --decoding forkjoin`` writes them (``critical_path_tokens`` as the decoder
measured it, ``n_response_tokens``, the per-sample ``critical_path`` / ``response_length`` in tokens,
``wall_s``).

By design, on aime24 with :data:`PROBLEMS` problems × :data:`K` samples:

* sample ``s`` of problem ``p`` is :func:`length` tokens long; a sample with a block spends
  :data:`LOSING` tokens in the shorter path, so its critical path is the length less :data:`LOSING`;
* step 100 branches on even samples, step 200 on every sample; step 200 is right more often
  (:func:`right`), so it is both sooner and more accurate: the only point on the frontier.
"""

from __future__ import annotations

from pathlib import Path

from pr1_eval.grading.annotate import annotate_structure
from pr1_eval.records.run import RunRecord
from pr1_eval.records.sample import SampleRecord
from pr1_eval.store.run_store import RunStore

FAMILY = "/ck/fj/global_step_*/actor"
STEPS = (100, 200)
PROBLEMS = 3
K = 2
LOSING = 40
TASK = "aime24"
BLOCK = ("<Parallel>\n<Path>\nAdd: 3 + 4 = 7.\nFinal Answer: 7\n</Path>\n<Path>\nCount to 7.\nFinal Answer: 7\n"
         "</Path>\n</Parallel>\n<Summary>\nBoth give 7.\n</Summary>\n")


def length(p: int, s: int) -> int:
    return 200 + 50 * p + 10 * s


def branches(step: int, s: int) -> bool:
    return step == 200 or s % 2 == 0


def right(step: int, p: int, s: int) -> bool:
    return (p + s) % 3 < step // 100


def critical(step: int, p: int, s: int) -> int:
    return length(p, s) - (LOSING if branches(step, s) else 0)


def run_name(step: int, prefix: str = "fj") -> str:
    return f"{prefix}-step{step}"


def build_forkjoin_runs(root: Path, prefix: str = "fj", model: str = FAMILY) -> dict[str, Path]:
    """The two runs under ``root`` by name; ``prefix`` starts their names and ``model`` is their
    model path with ``*`` for the step (the hostile-text tests give both an attack)."""
    runs = {}
    for step in STEPS:
        records = []
        for p in range(PROBLEMS):
            for s in range(K):
                ok = right(step, p, s)
                text = ("Let me think.\n" + (BLOCK if branches(step, s) else "") + f"Final Answer: {7 if ok else 8}")
                record = SampleRecord(task=TASK, problem_id=f"f{p}", sample_idx=s, gold="7", response=text,
                                      finish_reason="stop", n_response_tokens=length(p, s),
                                      critical_path_tokens=critical(step, p, s),
                                      engine_calls=4 if branches(step, s) else 1, correct=ok, correct_paper=ok,
                                      extracted_answer="7" if ok else "8", answer_source="final_answer",
                                      grade_status="ok", wall_s=0.5 + 0.001 * critical(step, p, s))
                annotate_structure(record)  # blocks from the text; the lengths as designed, in tokens
                record.critical_path, record.response_length = critical(step, p, s), length(p, s)
                record.losing_path_length, record.length_unit = length(p, s) - critical(step, p, s), "token"
                records.append(record)
        info = {"name": run_name(step, prefix), "status": "complete",
                "model": {"path": model.replace("*", str(step)), "step": step, "family": model},
                "decoding": {"mode": "forkjoin", "paths": 2}, "k": K, "position_unit": "char",  # block positions: no tokenizer here
                "engine": {"backend": "hf"},
                "tasks": {TASK: {"k": K, "n_problems": PROBLEMS, "problem_ids": [f"f{p}" for p in range(PROBLEMS)]}}}
        folder = root / f"fj-{step}"
        store = RunStore(folder)
        store.write_run(RunRecord.from_dict(info))
        store.rewrite(records)
        runs[run_name(step, prefix)] = folder
    return runs
