"""Runs with known per-problem counts, for leaderboard, HTML and notebook tests.

A run is given as ``{task: {problem_id: c}}`` (c of k samples correct); sample ``s`` of a problem
is correct when ``s < c``, so every expected number can be computed by hand from the counts.
Responses are real text passed through pr1_eval's ``annotate_structure`` (so block fields are
what the harness would store); ``block_every`` puts a ``<Parallel>`` block into every n-th sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pr1_eval.grading.annotate import annotate_structure
from pr1_eval.records.run import RunRecord
from pr1_eval.records.sample import SampleRecord
from pr1_eval.store.run_store import RunStore

BLOCK = ("<Parallel>\n<Path>\nTry 2 + 3.\nFinal Answer: 5\n</Path>\n<Path>\nTry 10 / 2.\nFinal Answer: 5\n</Path>\n"
         "</Parallel>\n<Summary>\nBoth give 5.\n</Summary>\n")


def sample(task: str, pid: str, idx: int, correct: bool, *, correct_paper: bool | None = None,
           block: bool = False, lead: int = 40) -> SampleRecord:
    """One graded sample: answer 5 (correct) or 6, with a block after ``lead`` characters of prose."""
    answer = "5" if correct else "6"
    text = ("x" * lead + "\n" + (BLOCK if block else "") + f"So it is {answer}.\nFinal Answer: {answer}")
    record = SampleRecord(task=task, problem_id=pid, sample_idx=idx, response=text, gold="5", finish_reason="stop",
                          n_response_tokens=len(text.split()))
    annotate_structure(record)
    record.extracted_answer, record.answer_source = answer, "final_answer"
    record.correct = correct
    record.correct_paper = correct if correct_paper is None else correct_paper
    record.grade_status = "ok"
    record.answer_class = 0 if correct else 1
    return record


def write_counts_run(root: Path, name: str, counts: Mapping[str, Mapping[str, int]], *, k: int | Mapping[str, int],
                     step: int | None = None, family: str = "/ckpt/exp", decoding: str = "sequential",
                     data_hash: str | Mapping[str, str | None] | None = "hash-v1", block_every: int = 0,
                     lead: int = 40, paper_counts: Mapping[str, Mapping[str, int]] | None = None,
                     status: str = "complete", declared: Mapping[str, list[str]] | None = None) -> Path:
    """Write a run whose problem ``pid`` of ``task`` has ``counts[task][pid]`` correct of ``k``
    (``k`` per task, as an import with ``--k TASK=N`` declares it, when a mapping)."""
    task_k = {t: (k[t] if isinstance(k, Mapping) else k) for t in counts}
    records = []
    for task, problems in counts.items():
        for pid, c in problems.items():
            c_paper = (paper_counts or {}).get(task, {}).get(pid, c)
            for s in range(task_k[task]):
                block = bool(block_every) and s % block_every == 0
                records.append(sample(task, pid, s, s < c, correct_paper=s < c_paper, block=block, lead=lead))
    model = f"{family}/global_step_{step}" if step is not None else family
    hashes = {t: (data_hash.get(t) if isinstance(data_hash, Mapping) else data_hash) for t in counts}
    info: dict[str, Any] = {
        "name": name, "model": {"path": model, "revision": None, "step": step}, "decoding": {"mode": decoding},
        "k": k if isinstance(k, int) else None, "status": status,
        "tasks": {t: {"data_hash": hashes[t], "n_problems": len((declared or counts)[t]),
                      "problem_ids": list((declared or counts)[t]), "k": task_k[t]} for t in counts},
    }
    store = RunStore(root / name)
    store.write_run(RunRecord.from_dict(info))
    store.append(records)
    return store.root
