"""Structured positions and sibling mask from the spans the rollout made, not from a re-parse.

The official trainer (``parallel_thinking_loop_v3``'s ``append_tokens``) places each block from the
requests it sent: every path request's tokens (its ``<Path>`` … ``</Path>``) restart at
``p + 1`` (``p`` = the position of ``<Parallel>``), the token after the last path (``</Parallel>``)
sits at ``p + longest path + 1`` and the rest follows on; a path's tokens cannot see its sibling
paths', everything after the block sees them all. :func:`pr1_eval.protocol.mask.build_mask_and_positions`
derives the same layout by parsing the tokens — identical on well-formed blocks, but a model that
writes ``<Parallel>`` or ``<Path>`` inside a path makes the parse read structure the rollout never
had (from the stray tag on everything is plain causal), while the spans still say where each path
request began and ended. :func:`mask_and_positions_from_spans` is the span reading.

Spans are response offsets ``(block, start, end)`` of each path (``ForkJoinMachine.blocks``); the
fork-join agent loop hands them on as ``extra_fields["pr1_path_spans"]``. The official three-path
defect (its ``</Parallel>`` shift is taken from the second path's end) is not copied.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

import numpy as np
import torch

PathSpan = tuple[int, int, int]
"""``(block, start, end)`` of one path in the response, ``end`` exclusive; ``<Path>``/``</Path>`` included."""

SPANS_KEY = "pr1_path_spans"


def mask_and_positions_from_spans(
    length: int, spans: Sequence[PathSpan], response_start: int = 0, device: torch.device | str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mask [L, L] bool, position_ids [L] long)`` for a sequence of ``length`` tokens whose
    response (from ``response_start``) holds the path ``spans``; spans past ``length`` (a response
    cut at its budget) are clipped."""
    positions = np.arange(length, dtype=np.int64)
    mask = np.tri(length, dtype=bool)
    shift = 0  # how far positions from here on sit below their index
    for _, block in groupby(sorted(spans), key=lambda span: span[0]):
        paths = [(response_start + s, min(response_start + e, length)) for _, s, e in block]
        paths = [(s, e) for s, e in paths if s < e]
        if not paths:
            continue
        first = paths[0][0]
        base = first - shift  # position of the first <Path>: p + 1
        for s, e in paths:
            positions[s:e] = np.arange(base, base + e - s)
        for i, (s_i, e_i) in enumerate(paths):
            for s_j, e_j in paths[:i]:
                mask[s_i:e_i, s_j:e_j] = False  # a later sibling never sees an earlier one
        after = paths[-1][1]
        longest = max(e - s for s, e in paths)
        shift = after - (base + longest)
        positions[after:] = np.arange(base + longest, base + longest + length - after)
    return torch.from_numpy(mask).to(device), torch.from_numpy(positions).to(device)
