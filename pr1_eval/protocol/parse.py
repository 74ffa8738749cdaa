"""Parse a response into main-line text and parallel blocks, and check its format.

The format check is the paper's Algorithm 1 made strict: tags must nest, each block has at
least two paths, each ``</Parallel>`` is followed by ``<Summary>…</Summary>`` with no other tag
in between, and nothing is left open. Only the exact six tags count; look-alikes such as
``<Parallelogram>`` or ``<path>`` are plain text. :func:`parse_structure` never raises: a
scorer and an RL reward call it on arbitrary model output.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pr1_eval.protocol import tags as T

_TAG_RE = re.compile(r"</?(?:Parallel|Path|Summary)>")


@dataclass(frozen=True)
class Span:
    """Character range ``[start, end)`` of a region's content (tags excluded)."""

    start: int
    end: int
    closed: bool


@dataclass
class Block:
    """One ``<Parallel>`` block: its paths and the summary that follows it.

    ``start`` is the offset of ``<Parallel>``; ``end`` is the offset just after
    ``</Parallel>`` (or where the block was cut off when it never closed).
    """

    start: int
    end: int = -1
    closed: bool = False
    paths: list[Span] = field(default_factory=list)
    summary: Span | None = None
    token_start: int | None = None
    token_end: int | None = None


@dataclass
class Structure:
    """The parse of one response. ``error`` is ``None`` exactly when ``format_ok``."""

    text_length: int
    blocks: list[Block]
    format_ok: bool
    error: str | None
    stray_paths: list[Span] = field(default_factory=list)

    @property
    def has_parallel(self) -> bool:
        """At least one ``<Parallel>`` block was opened."""
        return bool(self.blocks)

    @property
    def n_blocks(self) -> int:
        return len(self.blocks)

    @property
    def paths_per_block(self) -> list[int]:
        return [len(b.paths) for b in self.blocks]

    def path_spans(self) -> list[Span]:
        """All path content ranges, closed or not, in text order."""
        spans = [p for b in self.blocks for p in b.paths] + self.stray_paths
        return sorted(spans, key=lambda span: span.start)


class _Parser:
    """State machine over the tag stream; records the first format error and keeps going."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.blocks: list[Block] = []
        self.stray_paths: list[Span] = []
        self.path_is_stray = False
        self.error: str | None = None
        self.state = "main"  # main | parallel | path | await_summary | summary
        self.path_start = 0
        self.summary_start = 0

    def fail(self, message: str, offset: int) -> None:
        if self.error is None:
            self.error = f"{message} at character {offset}"

    def close_path(self, end: int, closed: bool) -> None:
        span = Span(self.path_start, end, closed)
        if self.path_is_stray:
            self.stray_paths.append(span)
            self.state = "main"
        else:
            self.blocks[-1].paths.append(span)
            self.state = "parallel"

    def end_block(self, end: int, closed: bool) -> None:
        block = self.blocks[-1]
        block.end, block.closed = end, closed
        if len(block.paths) < 2:
            self.fail(f"block {len(self.blocks)} has {len(block.paths)} path(s), needs at least 2", block.start)

    def feed(self, tag: str, start: int, end: int) -> None:
        handler = {
            T.PARALLEL_OPEN: self.on_parallel_open,
            T.PARALLEL_CLOSE: self.on_parallel_close,
            T.PATH_OPEN: self.on_path_open,
            T.PATH_CLOSE: self.on_path_close,
            T.SUMMARY_OPEN: self.on_summary_open,
            T.SUMMARY_CLOSE: self.on_summary_close,
        }[tag]
        handler(start, end)

    def on_parallel_open(self, start: int, end: int) -> None:
        if self.state == "path":
            self.fail("<Parallel> inside an open <Path>", start)
            self.close_path(start, False)
        if self.state == "parallel":
            self.fail("<Parallel> inside an open <Parallel>", start)
            self.end_block(start, False)
        elif self.state == "await_summary":
            self.fail("<Parallel> where <Summary> was expected", start)
        elif self.state == "summary":
            self.fail("<Parallel> inside an open <Summary>", start)
            self._end_summary(start, False)
        self.blocks.append(Block(start=start))
        self.state = "parallel"

    def on_path_open(self, start: int, end: int) -> None:
        if self.state == "path":
            self.fail("<Path> inside an open <Path>", start)
            self.close_path(start, False)
        self.path_is_stray = self.state != "parallel"
        if self.path_is_stray:
            self.fail("<Path> outside a <Parallel> block", start)
            if self.state == "summary":
                self._end_summary(start, False)
        self.state = "path"
        self.path_start = end

    def on_path_close(self, start: int, end: int) -> None:
        if self.state != "path":
            self.fail("</Path> without an open <Path>", start)
            return
        self.close_path(start, True)

    def on_parallel_close(self, start: int, end: int) -> None:
        if self.state == "path":
            self.fail("</Parallel> while a <Path> is open", start)
            self.close_path(start, False)
        if self.state != "parallel" or not self.blocks:
            self.fail("</Parallel> without an open <Parallel>", start)
            return
        self.end_block(end, True)
        self.state = "await_summary"

    def on_summary_open(self, start: int, end: int) -> None:
        if self.state != "await_summary":
            self.fail("<Summary> not directly after </Parallel>", start)
            if self.state == "path":
                self.close_path(start, False)
            if self.state == "parallel":
                self.end_block(start, False)
            if not self.blocks or self.blocks[-1].summary is not None:
                self.state = "summary_orphan"
                return
        self.state = "summary"
        self.summary_start = end

    def _end_summary(self, end: int, closed: bool) -> None:
        self.blocks[-1].summary = Span(self.summary_start, end, closed)
        self.state = "main"

    def on_summary_close(self, start: int, end: int) -> None:
        if self.state == "summary_orphan":
            self.state = "main"
            return
        if self.state != "summary":
            self.fail("</Summary> without an open <Summary>", start)
            return
        self._end_summary(start, True)

    def finish(self) -> None:
        n = len(self.text)
        if self.state == "path":
            self.fail("<Path> left open at the end", n)
            self.close_path(n, False)
        if self.state == "parallel":
            self.fail("<Parallel> left open at the end", n)
            self.end_block(n, False)
        elif self.state == "await_summary":
            self.fail("</Parallel> not followed by <Summary>", n)
        elif self.state in ("summary", "summary_orphan"):
            self.fail("<Summary> left open at the end", n)
            if self.state == "summary":
                self._end_summary(n, False)


def parse_structure(text: str, token_offsets: Sequence[tuple[int, int]] | None = None) -> Structure:
    """Parse ``text``; with ``token_offsets`` (per-token char ranges) also fill token positions.

    Never raises on any string: malformed input yields ``format_ok=False`` and an error message.
    """
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    parser = _Parser(text)
    for match in _TAG_RE.finditer(text):
        parser.feed(match.group(0), match.start(), match.end())
    parser.finish()
    structure = Structure(len(text), parser.blocks, parser.error is None, parser.error, parser.stray_paths)
    if token_offsets is not None:
        attach_token_positions(structure, token_offsets)
    return structure


def char_to_token_index(token_offsets: Sequence[tuple[int, int]], char: int) -> int:
    """Index of the token that contains ``char`` (or the first token starting after it)."""
    starts = [s for s, _ in token_offsets]
    return max(0, bisect.bisect_right(starts, char) - 1) if token_offsets else 0


def attach_token_positions(structure: Structure, token_offsets: Sequence[tuple[int, int]]) -> None:
    """Fill ``token_start``/``token_end`` of each block: the token of ``<Parallel>`` and one past
    the token of the block's last character."""
    for block in structure.blocks:
        block.token_start = char_to_token_index(token_offsets, block.start)
        block.token_end = char_to_token_index(token_offsets, max(block.start, block.end - 1)) + 1


def outside_paths(text: str, structure: Structure | None = None) -> str:
    """``text`` with every path's content blanked out (same length), so searches for the final
    answer never match inside a ``<Path>``, closed or not."""
    structure = structure or parse_structure(text)
    chars = list(text)
    for span in structure.path_spans():
        for i in range(span.start, min(span.end, len(chars))):
            if chars[i] != "\n":
                chars[i] = " "
    return "".join(chars)
