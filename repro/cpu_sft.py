"""``pr1-repro sft-cpu``: the official SFT stage (``pr1-repro run sft``) on a CPU, for a real small model.

The nano curriculum proves VERL's trainers run on a CPU with a tiny model; this runs the same
stage, through the same machinery (:mod:`repro.nano.runner`: the stage config a GPU user runs,
the CPU platform loaded through VERL's plugin hook, what CPU forces from
:func:`repro.nano.plan.cpu_overrides`, the log streamed and VERL's own metric lines read back,
``pr1-repro merge`` on every checkpoint), on a real pretrained model such as SmolLM2-135M
(``pr1-repro model smollm2``) and the Parallel-GSM8K rows of ``pr1-repro data``.

What a laptop forces beyond the nano job, each a flag with the paper's value as the reference:
the rows (``--rows``: the first N rows of the SFT parquet, in its order, whose chat-templated
length fits ``--max-length``; rows longer than that are left out and counted, never cut, as the
official SFT's ``truncation: error``), the batch (``--batch``, the paper's 128), the steps
(``--steps``; default one epoch of the kept rows) and how often a checkpoint is saved
(``--checkpoints``: that many, evenly spaced, the last at the last step). The learning rate
defaults to 1e-4 with the paper's cosine schedule and 10 % warm-up: the paper's 1e-5 over 5 epochs
of batch 128 moves a 135M model little in the few dozen steps a CPU affords. ``--schedule constant``
holds the peak after the warm-up, and ``--steps`` beyond one epoch runs as many epochs as they need.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from repro.checkpoints import find_steps
from repro.nano.metrics import step_metrics
from repro.nano.plan import cpu_overrides

SFT_FILE = "sft_parallel_gsm8k.parquet"
MARGIN = 16
"""Tokens kept free under ``--max-length``: VERL tokenises turn by turn, which may differ from one whole-chat
templating by a token or two, and a row over the limit stops the job (``truncation: error``)."""


@dataclass(frozen=True)
class CpuSftPlan:
    """The sizes of one CPU SFT job (what is not here is the stage config's)."""

    rows: int | None = None
    max_length: int = 1024
    batch: int = 4
    steps: int | None = None
    checkpoints: int = 4
    lr: float = 1e-4
    schedule: str = "cosine"
    """VERL's ``optim.lr_scheduler_type``: ``cosine`` (the paper's, decaying to 0 at the last step) or ``constant``
    (held at ``lr`` after the same 10 % warm-up). A CPU run is a few dozen steps; a cosine schedule spends its last
    half at a fraction of the peak, which a short run cannot afford (docs/guides/smollm2.md measures it)."""


@dataclass
class CpuSftReport:
    """What the job did; ``OUT/sft_cpu.json``."""

    model: str
    plan: dict[str, Any]
    rows_kept: int
    rows_too_long: int
    steps: int
    save_steps: list[int]
    seconds: float
    metrics: dict[int, dict[str, float]] = field(default_factory=dict)
    merged: list[str] = field(default_factory=list)


def row_lengths(parquet: Path, model: str) -> list[int]:
    """Each SFT row's chat-templated length in the model's tokens (prompt + response + EOS)."""
    import pandas as pd
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    lengths = []
    for messages in pd.read_parquet(parquet)["messages"]:
        encoded: Any = tokenizer.apply_chat_template(list(messages), tokenize=True, return_dict=True)
        lengths.append(len(encoded["input_ids"]) + 1)
    return lengths


def subset_rows(data_dir: Path, model: str, plan: CpuSftPlan, out: Path) -> tuple[int, int]:
    """Write the rows the job trains on to ``out/SFT_FILE``; (kept, left out as longer than max_length)."""
    import pandas as pd

    source = data_dir / SFT_FILE
    if not source.is_file():
        raise Pr1EvalError(f"{source}: no SFT data; build it with `pr1-repro data --out {data_dir}`")
    frame = pd.read_parquet(source)
    fits = [n + MARGIN <= plan.max_length for n in row_lengths(source, model)]
    kept = frame[fits]
    if plan.rows is not None:
        kept = kept.head(plan.rows)
    if len(kept) < plan.batch:
        raise Pr1EvalError(f"only {len(kept)} rows fit --max-length {plan.max_length}; raise it or lower --batch")
    out.mkdir(parents=True, exist_ok=True)
    kept.to_parquet(out / SFT_FILE, index=False)
    return len(kept), fits.count(False)


def save_steps(steps: int, checkpoints: int) -> list[int]:
    """``checkpoints`` steps evenly spaced, the last one the last step (VERL saves at multiples of save_freq and
    at the end)."""
    freq = max(1, math.ceil(steps / max(1, checkpoints)))
    return sorted({*range(freq, steps + 1, freq), steps})


SCHEDULES = ("cosine", "constant")


def epochs_for(steps: int, rows: int, batch: int) -> int:
    """Passes over the rows that ``steps`` optimiser steps need: VERL's SFT trainer stops at the end of its
    ``total_epochs`` even when ``total_training_steps`` is not reached, so more steps than one epoch holds need
    more epochs (the trainer then stops at the step count, mid-epoch if need be)."""
    return max(1, math.ceil(steps / max(1, rows // batch)))


def overrides(plan: CpuSftPlan, steps: int, rows: int) -> list[str]:
    """CPU's overrides (the nano job's, with their reasons in repro.nano.plan) and this job's sizes."""
    if plan.schedule not in SCHEDULES:
        raise Pr1EvalError(f"--schedule {plan.schedule}: VERL's SFT knows {' and '.join(SCHEDULES)}; pick one")
    forced = [o.text for o in cpu_overrides("sft", structured=False)]
    freq = save_steps(steps, plan.checkpoints)[0]
    return [*forced, f"trainer.total_training_steps={steps}", f"data.train_batch_size={plan.batch}",
            f"data.max_length={plan.max_length}", f"optim.lr={plan.lr}",
            f"optim.lr_scheduler_type={plan.schedule}", f"trainer.save_freq={freq}",
            f"trainer.total_epochs={epochs_for(steps, rows, plan.batch)}", "trainer.test_freq=-1"]


def run_cpu_sft(model: str, out: Path, data_dir: Path, plan: CpuSftPlan,
                echo: Callable[[str], None] = print) -> CpuSftReport:
    """Subset the rows, run ``pr1-repro run sft`` on CPU, merge every checkpoint; the report (also in OUT)."""
    from repro.nano.runner import child_environment, stream

    out = out.resolve()
    kept, too_long = subset_rows(data_dir, model, plan, out / "data")
    steps = plan.steps or kept // plan.batch
    echo(f"[sft-cpu] {kept} rows (left out {too_long} longer than {plan.max_length} tokens), batch {plan.batch}, "
         f"{steps} steps ({epochs_for(steps, kept, plan.batch)} epochs), lr {plan.lr} {plan.schedule}, "
         f"checkpoints at {save_steps(steps, plan.checkpoints)}")
    env = child_environment()
    argv = [sys.executable, "-m", "repro.cli", "run", "sft", "--model", str(Path(model).resolve()),
            "--gpus-per-node", "1", "--out", str(out), "--data-dir", str(out / "data"),
            "--experiment", out.name, "--", *overrides(plan, steps, kept)]
    started = time.monotonic()
    status = stream(argv, out / "logs" / "sft.log", env, echo)
    metrics = step_metrics((out / "logs" / "sft.log").read_text(encoding="utf-8", errors="replace").splitlines())
    if status != 0 or len(metrics) < steps:
        raise Pr1EvalError(f"SFT failed: exit {status}, {len(metrics)} of {steps} steps logged; log {out}/logs/sft.log")
    status = stream([sys.executable, "-m", "repro.cli", "merge", str(out)], out / "logs" / "merge.log", env, echo)
    merged = [str(s.model_dir) for s in find_steps(out) if s.is_merged]
    if status != 0:
        raise Pr1EvalError(f"pr1-repro merge {out} failed (exit {status}); log {out}/logs/merge.log")
    report = CpuSftReport(model, asdict(plan), kept, too_long, steps, save_steps(steps, plan.checkpoints),
                          time.monotonic() - started, metrics, merged)
    (out / "sft_cpu.json").write_text(json.dumps(asdict(report), indent=2) + "\n", encoding="utf-8")
    return report


def summary_table(report: CpuSftReport) -> str:
    """Loss per step and the merged checkpoints, as a table."""
    lines = ["| step | train/loss (nats/token) | checkpoint |", "|---|---|---|"]
    saved = set(report.save_steps)
    for step, values in sorted(report.metrics.items()):
        loss = values.get("train/loss", math.nan)
        lines.append(f"| {step} | {loss:.4f} | {'saved, merged' if step in saved else ''} |")
    lines.append(f"{report.rows_kept} rows, {report.steps} steps in {report.seconds:.0f} s; merged: "
                 + ", ".join(report.merged))
    return "\n".join(lines)
