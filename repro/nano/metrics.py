"""VERL's console metric lines, read back: the nano curriculum's evidence comes from VERL's own log.

VERL's console logger (``verl.utils.tracking``, ``logger: [console]``) prints one line per step:
``step:3 - train/loss:6.68 - train/grad_norm:0.77 - …`` (SFT) or ``step:3 - actor/pg_loss:… -
critic/score/mean:… - rollout_corr/kl:…`` (PPO). Ray prefixes a worker's lines with
``(TaskRunner pid=…)`` and colour codes. :func:`step_metrics` turns a log into ``{step: {key:
value}}``, so the checks assert on what VERL itself measured, not on a number of ours.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

ANSI = re.compile(r"\x1b\[[0-9;]*m")
STEP_LINE = re.compile(r"(?<![\w/])step:(\d+) - (.*)$")
"""``step:N - …`` wherever it starts: after Ray's prefix, or glued to a tqdm bar that VERL's SFT
trainer redraws with carriage returns (``… 10.6s/it]step:3 - train/loss:10.75 - …``); never the
``training/global_step:N`` inside a PPO line."""


def _value(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_metric_line(line: str) -> tuple[int, dict[str, float]] | None:
    """``(step, metrics)`` of one console line, or None when the line is not a metric line."""
    segments = [seg for seg in ANSI.sub("", line).split("\r") if STEP_LINE.search(seg)]
    match = STEP_LINE.search(segments[-1].rstrip()) if segments else None
    if not match:
        return None
    metrics: dict[str, float] = {}
    for part in match.group(2).split(" - "):
        key, sep, raw = part.rpartition(":")
        value = _value(raw.strip()) if sep else None
        if key and value is not None:
            metrics[key.strip()] = value
    return int(match.group(1)), metrics


def step_metrics(lines: Iterable[str]) -> dict[int, dict[str, float]]:
    """Every step's metrics in a log (a step printed twice keeps its last line, as a resumed job would)."""
    out: dict[int, dict[str, float]] = {}
    for line in lines:
        parsed = parse_metric_line(line)
        if parsed:
            out[parsed[0]] = parsed[1]
    return dict(sorted(out.items()))


def series(metrics: dict[int, dict[str, float]], key: str) -> list[float]:
    """One metric over the steps that logged it, in step order (NaN where a step lacks it)."""
    return [m.get(key, math.nan) for _, m in sorted(metrics.items())]
