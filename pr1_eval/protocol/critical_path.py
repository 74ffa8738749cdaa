"""The critical path of a parsed response: what an engine that runs sibling paths side by side waits for.

One definition, the protocol's (:mod:`pr1_eval.protocol.forkjoin`): the main line, for every block
its longest path *with its tags*, the join (``</Parallel>``, the newline, ``<Summary>``) and the
summary, i.e. the response's length minus every shorter sibling path. Fork-join decoding measures it
on its tokens (:meth:`~pr1_eval.protocol.forkjoin.ForkJoinMachine.critical_path_tokens`); this module
computes it from the text, for every response with blocks whatever produced it (a Seen model decoding
in one stream, an import, a training dump), so the token-latency figures exist for every run.

Units: with per-token character ranges (``token_offsets``, the re-tokenisation that block positions
use) lengths count tokens, a path spanning from the token holding its ``<Path>`` to the one holding
the last character of its ``</Path>``; without, they count characters. On well-formed blocks whose
tags are single tokens the token count equals the fork-join machine's (a test compares them).

Why a pure function over :class:`~pr1_eval.protocol.parse.Structure`: annotation (generation,
imports, regrades) and the store's reader of runs stored before these figures existed both call it,
and it must never raise on arbitrary model output, as the parse never does.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from pr1_eval.protocol import tags as T
from pr1_eval.protocol.parse import Structure, parse_structure

_OPEN, _CLOSE = len(T.PATH_OPEN), len(T.PATH_CLOSE)


@dataclass(frozen=True)
class PathLengths:
    """A response's length, its critical path and what its losing paths spent, in ``unit``."""

    response_length: int
    critical_path: int
    unit: str  # 'token' or 'char'

    @property
    def losing_path_length(self) -> int:
        """Length spent in sibling paths shorter than their block's longest."""
        return self.response_length - self.critical_path


def _path_extents(structure: Structure) -> list[list[tuple[int, int]]]:
    """Per block, each path's character range with its tags (an unclosed path ends where it was cut)."""
    return [[(p.start - _OPEN, p.end + (_CLOSE if p.closed else 0)) for p in block.paths]
            for block in structure.blocks]


def path_lengths(structure: Structure, token_offsets: Sequence[tuple[int, int]] | None = None) -> PathLengths | None:
    """The lengths of the parsed response (tokens over ``token_offsets`` when given, else characters);
    None when the response has no text. Never raises."""
    if structure.text_length == 0:
        return None
    extents = _path_extents(structure)
    if token_offsets is None:
        total, unit = structure.text_length, "char"
        lengths = [[max(0, end - start) for start, end in block] for block in extents]
    else:
        starts = [s for s, _ in token_offsets]
        total, unit = len(token_offsets), "token"

        def index(char: int) -> int:
            return max(0, bisect.bisect_right(starts, char) - 1) if starts else 0

        lengths = [[index(max(start, end - 1)) + 1 - index(start) for start, end in block] for block in extents]
    hidden = sum(sum(block) - max(block) for block in lengths if block)
    return PathLengths(response_length=total, critical_path=max(0, total - hidden), unit=unit)


def text_path_lengths(text: str | None) -> PathLengths | None:
    """:func:`path_lengths` of a raw text in characters (the reader of older runs uses it)."""
    return path_lengths(parse_structure(text or ""))
