"""``--shard i/n``: a deterministic slice of the problems, for clusters that schedule job arrays.

Shard ``i`` of ``n`` (0-based, so a Slurm array ``--array=0-7`` passes
``--shard $SLURM_ARRAY_TASK_ID/8``) takes every ``n``-th problem of each task starting at ``i``,
after ``--limit``. Round-robin rather than contiguous blocks because benchmarks are often sorted
by difficulty (AIME I then II, MATH by level): interleaving gives every shard a similar mix. The
slice depends only on the task data, whose hash ``run.json`` records, so ``pr1-eval merge`` can
prove that the shards together cover every problem exactly once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, TypeVar

from pr1_eval.errors import Pr1EvalError

T = TypeVar("T")

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` → ``(i, n)`` with ``0 <= i < n``; a clear error otherwise."""
    match = _SHARD.match(text)
    if not match:
        raise Pr1EvalError(f"--shard {text!r}: expected INDEX/COUNT, e.g. --shard 0/8 (0-based index)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 0 <= index < count:
        raise Pr1EvalError(f"--shard {text!r}: the index must be in 0..{max(count - 1, 0)} (0-based) and the count at least 1")
    return index, count


def select_shard(items: Sequence[T], index: int, count: int) -> list[T]:
    """Every ``count``-th item starting at ``index``."""
    return list(items[index::count])


def shard_section(index: int, count: int, problem_ids: dict[str, list[str]], task_sizes: dict[str, int]) -> dict[str, Any]:
    """The ``run.json`` record of a shard: which slice, which problems, of how many per task."""
    return {"index": index, "count": count, "problem_ids": problem_ids, "task_sizes": task_sizes}


def shard_suffix(index: int, count: int) -> str:
    """Default run-folder suffix, so the shards of one job array never share a folder."""
    return f"-shard{index}of{count}"
