"""Fixture runs for the dashboard tests, made the way users make runs: generated JSON Lines
imported (and graded by the real grader) with :func:`pr1_eval.ingest.importer.import_jsonl`.

Three checkpoints of one training job (steps 100, 200, 300; later steps answer more problems
correctly), and one run whose responses are hostile: HTML, script and ``javascript:`` links in
the main line, inside a path and in the final answer. Every payload sets ``window.__pwned`` if
it ever runs, which the browser test checks.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from pr1_eval.ingest.importer import import_jsonl
from pr1_eval.testing.tiny_traces import make_question, make_response

STEPS = (100, 200, 300)
TASKS = {"aime24": 4, "amc23": 3}
K = 4
FAMILY = "/ck/exp/global_step_*/actor"
SCRIPT = "<script>window.__pwned = 'script'</script>"
IMG = "<img src=x onerror=\"window.__pwned = 'img'\">"
JS_LINK = "[click me](javascript:window.__pwned='link')"
HOSTILE_RUN = "hostile"


def step_rows(step: int, seed: int = 0) -> list[dict[str, object]]:
    """Samples of one checkpoint: sample i of problem p is right when (p + i) % 4 < step / 100."""
    rng = random.Random(seed)
    rows = []
    for task, n_problems in TASKS.items():
        problems = [make_question(rng) for _ in range(n_problems)]
        for p, problem in enumerate(problems):
            for i in range(K):
                response = make_response(random.Random(f"{step}-{task}-{p}-{i}"), problem)
                if (p + i) % 4 >= step // 100:
                    response = response.rsplit("Final Answer:", 1)[0] + f"Final Answer: {problem.answer + 1}"
                rows.append({"task": task, "problem_id": f"p{p}", "sample_idx": i, "response": response,
                             "gold": str(problem.answer), "problem": problem.text,
                             "model": f"/ck/exp/global_step_{step}/actor", "step": step})
    return rows


def hostile_rows() -> list[dict[str, object]]:
    """Responses carrying markup everywhere a response can carry text (sample 0 of h0 in the main
    line, both paths, the summary; sample 1 in the final answer), and one block with a single path
    (a format-check failure)."""
    block = (f"<Parallel>\n<Path>\nPath one {SCRIPT} 2 + 2 = 4\nFinal Answer: 4\n</Path>\n<Path>\nPath two {IMG} "
             f"also 4\n</Path>\n</Parallel>\n<Summary>\nBoth say 4 {JS_LINK}\n</Summary>\n\n")
    texts = [
        f"Let me think {SCRIPT} {IMG} {JS_LINK}\n\n{block}Final Answer: 4",
        f"No block here {IMG}\n\nFinal Answer: {IMG}",
        "<Parallel>\n<Path>\nonly one path\n</Path>\n</Parallel>\n<Summary>\nlonely\n</Summary>\n\nFinal Answer: 4",
    ]
    return [{"task": "aime24", "problem_id": f"h{p}", "sample_idx": i, "response": texts[(2 * p + i) % 3], "gold": "4",
             "problem": f"What is 2 + 2? {SCRIPT} {JS_LINK}", "model": "org/hostile-model"}
            for p in range(2) for i in range(2)]


def write_import(rows: list[dict[str, object]], out: Path) -> Path:
    source = out.with_suffix(".jsonl")
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return import_jsonl(source, out, workers=1)


def build_runs(root: Path) -> dict[str, Path]:
    """The fixture runs under ``root/runs`` by name: step100, step200, step300, hostile."""
    runs = {f"step{s}": write_import(step_rows(s), root / "runs" / f"step{s}") for s in STEPS}
    runs[HOSTILE_RUN] = write_import(hostile_rows(), root / "runs" / HOSTILE_RUN)
    return runs


KILLED_RUN = "killed"
KILLED_STEP = 250
KILLED_PROBLEMS = ("p0", "p1")  # of aime24's 4; amc23 (declared) never started


def build_killed_run(root: Path) -> Path:
    """A checkpoint of the same job killed early: status ``running``, 2 of aime24's 4 problems held
    (each 1 of 4 samples right, as at step 100: mean 0.25 on what it holds), amc23 declared but
    never started. Imported like the others, then given the run.json a killed run has."""
    rows = [{**row, "model": f"/ck/exp/global_step_{KILLED_STEP}/actor", "step": KILLED_STEP}
            for row in step_rows(100) if row["task"] == "aime24" and row["problem_id"] in KILLED_PROBLEMS]
    path = write_import(rows, root / "runs" / KILLED_RUN)
    record = json.loads((path / "run.json").read_text(encoding="utf-8"))
    record["status"] = "running"
    for task, n_problems in TASKS.items():
        entry = record["tasks"].get(task) or {"k": K}
        entry.update(n_problems=n_problems, problem_ids=[f"p{p}" for p in range(n_problems)])
        record["tasks"][task] = entry
    (path / "run.json").write_text(json.dumps(record), encoding="utf-8")
    return path
