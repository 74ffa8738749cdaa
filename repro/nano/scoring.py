"""After training: score the merged checkpoints, rank them, analyse the job's own rollouts.

What a researcher does with a finished job, with pr1-eval's own commands (in this process, so the
nano job is the same code paths as ``pr1-eval sweep``, ``leaderboard`` and ``analyze``):

- ``pr1-eval sweep`` over each stage's checkpoint folder, HF engine on CPU, a few GSM8K test problems
  (``--limit``, ``-k``): Seen stages with sequential decoding, Unseen stages with fork-join, so both
  decodings score a checkpoint VERL wrote. The tiny model scores near zero on real problems; these
  runs prove the path, not quality.
- ``pr1-eval leaderboard`` over those runs (JSON kept in ``OUT/leaderboard.json``).
- ``pr1-eval analyze --no-embeddings`` over the per-step rollout runs (``OUT/*/rollout_runs``),
  the same runs the dashboard's Training page reads (``pr1-eval dashboard OUT``).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pr1_eval.cli import main as pr1_cli
from pr1_eval.errors import Pr1EvalError
from repro import stages as repro_stages
from repro.nano.runner import StageResult

SCORE_TASK = "gsm8k"
SCORE_LIMIT = 4
SCORE_K = 2
SCORE_TOKENS = 96


def _pr1_eval(argv: list[str]) -> tuple[int, str]:
    """Run ``pr1-eval ARGV`` here; its exit status and what it printed."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        status = pr1_cli.main(argv)
    return status, buffer.getvalue()


def decoding_of(result: StageResult) -> str:
    """Fork-join for the Unseen (structured) stages, sequential for Seen: the paper's evaluation."""
    return "forkjoin" if repro_stages.STAGES[result.stage.stage].structured else "sequential"


def sweep_argv(result: StageResult, runs: Path) -> list[str]:
    return ["sweep", str(result.out), "--tasks", SCORE_TASK, "--limit", str(SCORE_LIMIT), "-k", str(SCORE_K),
            "--engine", "hf", "--decoding", decoding_of(result), "--max-new-tokens", str(SCORE_TOKENS),
            "--out-root", str(runs), "--family", result.stage.name]


def score_and_rank(results: list[StageResult], out: Path, echo: Callable[[str], None]) -> dict[str, Any]:
    """Sweep every stage's checkpoints, rank the runs, analyse the rollout runs; what each produced."""
    runs = out / "runs"
    scored: dict[str, Any] = {}
    for result in results:
        status, printed = _pr1_eval(sweep_argv(result, runs))
        if status != 0:
            raise Pr1EvalError(f"pr1-eval sweep of {result.out} failed (exit {status}):\n{printed[-2000:]}")
        scored[result.stage.name] = decoding_of(result)
        echo(f"[score] {result.stage.name}: swept with {decoding_of(result)} decoding into {runs}")
    status, printed = _pr1_eval(["leaderboard", str(runs), "--json"])
    if status != 0:
        raise Pr1EvalError(f"pr1-eval leaderboard {runs} failed (exit {status}):\n{printed[-2000:]}")
    board = json.loads(printed)
    (out / "leaderboard.json").write_text(json.dumps(board, indent=2) + "\n", encoding="utf-8")
    rollout_roots = [str(r.rollout_runs) for r in results if r.rollout_runs.is_dir()]
    analysis = out / "analysis"
    if rollout_roots:
        status, printed = _pr1_eval(["analyze", *rollout_roots, "--no-embeddings", "--json", "--out", str(analysis)])
        if status != 0:
            raise Pr1EvalError(f"pr1-eval analyze failed (exit {status}):\n{printed[-2000:]}")
    echo(f"[score] leaderboard: {out / 'leaderboard.json'}; analysis of the rollout runs: {analysis}")
    echo(f"[score] the Training page: pr1-eval dashboard {out}")
    return {"runs": str(runs), "decodings": scored, "leaderboard": str(out / "leaderboard.json"),
            "analysis": str(analysis) if rollout_roots else None,
            "ranked_runs": len(board.get("rows", board.get("runs", [])))}
