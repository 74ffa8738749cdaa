"""A response cut into what a trace viewer shows: main-line stretches and blocks, in reading order.

Why beside the loader and not in it: the viewer needs the same parse as the blocks frame (a
block's paths here equal its ``path_texts`` there), which :func:`pr1_eval.protocol.parse.
parse_structure` gives both, but none of the loading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pr1_eval.protocol import tags as T
from pr1_eval.protocol.parse import parse_structure


@dataclass(frozen=True)
class TraceSegment:
    """One piece of a response in reading order, for showing a trace: a stretch of the main line
    (``kind='main'``, its ``text``) or a block (``kind='block'``: each path's stripped ``paths``
    and the ``summary``, None when it has none). Offsets are characters of the response; tags
    themselves belong to no segment."""

    kind: Literal["main", "block"]
    start: int
    end: int
    text: str = ""
    block_idx: int | None = None
    paths: tuple[str, ...] = ()
    summary: str | None = None
    closed: bool = True


def response_segments(response: str) -> list[TraceSegment]:
    """``response`` split into main-line stretches and blocks, by the same parse as the blocks
    frame (so a block's paths here equal its ``path_texts`` there). Empty main stretches are left out."""
    text = response if isinstance(response, str) else ""
    segments: list[TraceSegment] = []
    position = 0
    for i, block in enumerate(parse_structure(text).blocks):
        if text[position:block.start].strip():
            segments.append(TraceSegment("main", position, block.start, text=text[position:block.start].strip("\n")))
        summary = text[block.summary.start:block.summary.end].strip() if block.summary else None
        end = block.end
        if block.summary is not None:
            end = block.summary.end + (len(T.SUMMARY_CLOSE) if block.summary.closed else 0)
        segments.append(TraceSegment("block", block.start, end, block_idx=i, closed=block.closed, summary=summary,
                                     paths=tuple(text[p.start:p.end].strip() for p in block.paths)))
        position = end
    if text[position:].strip():
        segments.append(TraceSegment("main", position, len(text), text=text[position:].strip("\n")))
    return segments
