"""Fast structure scans that give exactly what :func:`pr1_eval.protocol.parse.parse_structure` gives.

Why: the loader reads the structure of every response of a sweep (about 100,000 of them), and the
general parser, a state machine fed one tag at a time, is most of that cost. Two facts of the
parser make a scan with C-level string operations exact:

* A block is opened by every ``<Parallel>`` tag and by nothing else, so the parser's block count
  is the number of ``<Parallel>`` substrings (a tag holds ``<`` only as its first character, so
  no tag match can hide one, and the string cannot overlap itself). :func:`count_blocks` is that.
* On a well-formed response — tags in the order ``(<Parallel> (<Path></Path>){2,} </Parallel>
  <Summary></Summary>)*`` — the parser never reaches an error branch, so each block's spans
  follow from the tag positions alone. :func:`scan_well_formed` checks the tag order with one
  regular expression over the tags and reads the spans; it returns ``None`` for anything else,
  and the caller falls back to the parser (truncated, nested, stray or summary-less text).

``tests/pr1_eval/protocol/test_scan.py`` checks both against the parser on many varied texts.
"""

from __future__ import annotations

import re
from itertools import accumulate
from typing import NamedTuple

from pr1_eval.protocol import tags as T

#: The parser's tag pattern, captured so ``split`` keeps the tags between the text pieces.
_SPLIT_RE = re.compile(r"(</?(?:Parallel|Path|Summary)>)")
#: The tag sequence of a response the parser accepts without an error.
_WELL_FORMED_RE = re.compile(
    "(?:" + re.escape(T.PARALLEL_OPEN) + "(?:" + re.escape(T.PATH_OPEN + T.PATH_CLOSE) + "){2,}"
    + re.escape(T.PARALLEL_CLOSE + T.SUMMARY_OPEN + T.SUMMARY_CLOSE) + ")*")


class ScannedBlock(NamedTuple):
    """One block of a well-formed response: ``start``/``end`` as :class:`~pr1_eval.protocol.parse.Block`
    has them, each path's content text and ``(start, end)``, and the summary's likewise. Every
    path, the block and its summary are closed (that is what well-formed means); ``closed`` is
    there so the first five fields read like any block's (start, end, closed, paths, summary)."""

    start: int
    end: int
    closed: bool
    path_contents: list[str]
    summary_content: str
    path_spans: list[tuple[int, int]]
    summary_span: tuple[int, int]


def count_blocks(text: str) -> int:
    """``parse_structure(text).n_blocks``, without parsing."""
    return text.count(T.PARALLEL_OPEN)


def scan_well_formed(text: str) -> list[ScannedBlock] | None:
    """The blocks of ``text`` when it is well-formed (``parse_structure(text).format_ok``), else ``None``.

    Equal to the parser's blocks wherever it returns a list: same starts, ends, path and summary
    spans, all closed."""
    parts = _SPLIT_RE.split(text)  # [piece, tag, piece, tag, ..., piece]
    if _WELL_FORMED_RE.fullmatch("".join(parts[1::2])) is None:
        return None
    ends = list(accumulate(map(len, parts)))  # ends[i]: offset just after parts[i]
    blocks: list[ScannedBlock] = []
    i, n = 1, len(parts)
    while i < n:  # parts[i] is <Parallel>
        start = ends[i - 1]
        spans: list[tuple[int, int]] = []
        contents: list[str] = []
        i += 2
        while parts[i] == T.PATH_OPEN:  # then its content, </Path>, the piece after, the next tag
            spans.append((ends[i], ends[i + 1]))
            contents.append(parts[i + 1])
            i += 4
        # parts[i] is </Parallel>; then a piece, <Summary>, its content, </Summary>, a piece
        blocks.append(ScannedBlock(start, ends[i], True, contents, parts[i + 3], spans, (ends[i + 2], ends[i + 3])))
        i += 6
    return blocks
