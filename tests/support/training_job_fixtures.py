"""A synthetic training job whose behaviour is known by construction: one run per step, written
through the run store the way ``import-verl`` and repro's rollout writer write them.

The job runs the paper's mid-training curriculum: the parallel reward until :data:`SWITCH_STEP`,
accuracy alone after it (each step's ``training.reward_mode`` says which). By design:

* **parallel ratio rises, then falls**: :func:`n_parallel` of the step's rollouts open a block,
  most at the switch;
* **the first block moves later**: a step's responses open with ``10 + 6 * index`` words before
  the block, and the block and the rest are the same at every step;
* **accuracy rises**: sample ``s`` of problem ``p`` is right when ``(p + s) % K < n_right``.

Validation runs every third step (``k = 2``). Every other training step is written without a
stored summary (a run from before summaries were stored), so readers must compute it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pr1_eval.grading.annotate import annotate_structure
from pr1_eval.records.run import RunRecord
from pr1_eval.records.sample import SampleRecord
from pr1_eval.report.step_summary import step_summary
from pr1_eval.store.run_store import RunStore

JOB = "mid-job"
STEPS = tuple(range(0, 300, 25))  # 12 steps
SWITCH_STEP = 150
PROBLEMS = 6
K = 4
VAL_K = 2
BLOCK = ("<Parallel>\n<Path>\nAdd the parts: 3 + 4 = 7.\nFinal Answer: 7\n</Path>\n<Path>\nCount them one by one to "
         "7.\nFinal Answer: 7\n</Path>\n</Parallel>\n<Summary>\nBoth give 7.\n</Summary>\n")


def n_parallel(step: int, n: int) -> int:
    """Rollouts of a step (of ``n``) that open a block: rising to the switch, falling after."""
    share = 0.2 + 0.7 * step / SWITCH_STEP if step <= SWITCH_STEP else 0.9 - 0.6 * (step - SWITCH_STEP) / SWITCH_STEP
    return round(n * share)


def n_right(index: int) -> int:
    """Right samples of each problem's K at the step with this index (0 → 1 of 4, rising)."""
    return min(K, 1 + index // 4)


def reward_mode(step: int) -> str:
    return "parallel_accuracy" if step <= SWITCH_STEP else "accuracy"


def response(index: int, block: bool, right: bool) -> str:
    lead = "Let me think. " * (10 + 6 * index)
    middle = BLOCK if block else "Add the parts.\n"
    return f"{lead}\n{middle}So it is {7 if right else 8}.\nFinal Answer: {7 if right else 8}"


@dataclass(frozen=True)
class StepDesign:
    """What one step run holds, by construction (the tests' second method)."""

    kind: str
    step: int
    texts: tuple[str, ...]
    right: tuple[bool, ...]
    k: int


def step_samples(kind: str, step: int, index: int) -> tuple[list[SampleRecord], StepDesign]:
    k = K if kind == "train" else VAL_K
    n = PROBLEMS * k
    blocked = n_parallel(step, n)
    records, texts, rights = [], [], []
    for p in range(PROBLEMS):
        for s in range(k):
            i = p * k + s
            right = (p + s) % k < n_right(index) * k // K
            text = response(index, i < blocked, right)
            record = SampleRecord(task="dapo" if kind == "train" else "aime24", problem_id=f"q{p}", sample_idx=s,
                                  gold="7", response=text, finish_reason="stop", n_response_tokens=len(text) // 4,
                                  reward=1.0 if right else 0.0, correct=right, correct_paper=right,
                                  extracted_answer="7" if right else "8", answer_source="final_answer",
                                  grade_status="ok")
            annotate_structure(record)
            records.append(record)
            texts.append(text)
            rights.append(right)
    return records, StepDesign(kind, step, tuple(texts), tuple(rights), k)


def write_step(root: Path, kind: str, step: int, index: int, with_summary: bool,
               status: str = "complete", job: str = JOB) -> tuple[Path, StepDesign]:
    """One step's run at ``root/<train|val>/step-N`` (the layout ``import-verl`` writes)."""
    records, design = step_samples(kind, step, index)
    folder = root / ("train" if kind == "train" else "val") / f"step-{step:06d}"
    training = {"job": job, "kind": kind, "step": step, "format": "synthetic", "tags_kept": True,
                "structure_measurable": True, "stage": "mid_training", "reward_mode": reward_mode(step),
                "rows": len(records)}
    if with_summary:
        training["summary"] = step_summary(records).to_json()
    info = {"name": f"{job}-{kind}-step-{step:06d}", "status": status, "model": {"step": step, "family": job},
            "decoding": {"mode": "unknown"}, "k": design.k, "position_unit": "char", "training": training,
            "tasks": {records[0].task: {"k": design.k, "n_problems": PROBLEMS,
                                        "problem_ids": [f"q{p}" for p in range(PROBLEMS)]}}}
    store = RunStore(folder)
    store.write_run(RunRecord.from_dict(info))
    store.rewrite(records)
    return folder, design


def build_job(root: Path, steps: tuple[int, ...] = STEPS, job: str = JOB) -> dict[tuple[str, int], StepDesign]:
    """The job's step runs under ``root``; the design of each (kind, step). ``job`` names the job
    (the hostile-text tests give it an attack)."""
    designs = {}
    for index, step in enumerate(steps):
        designs[("train", step)] = write_step(root, "train", step, index, with_summary=index % 2 == 0, job=job)[1]
        if index % 3 == 0:
            designs[("validation", step)] = write_step(root, "validation", step, index, with_summary=True,
                                                       job=job)[1]
    return designs


def first_block_position(design: StepDesign) -> float | None:
    """Mean over responses with a block of where it starts, by ``str.index`` (characters)."""
    positions = [t.index("<Parallel>") / len(t) for t in design.texts if "<Parallel>" in t]
    return sum(positions) / len(positions) if positions else None
