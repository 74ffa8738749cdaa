"""One block layout: the whitespace around the tags that fork-join produces.

Fork-join writes a block as ``<Parallel><Path>…</Path><Path>…</Path></Parallel>\\n<Summary>…``:
the model stops at ``<Parallel>``, each path is its own request on ``context + <Path>`` that stops
at ``</Path>``, and the join is exactly ``</Parallel>\\n<Summary>``. Nothing sits between two
paths, between ``<Parallel>`` and the first ``<Path>``, or between the last ``</Path>`` and
``</Parallel>``. The Parallel-GSM8K SFT data puts newlines (and stray spaces) in those joins; a
model trained on it then meets, at rollout time, a layout it never saw, and the structured mask
has to guess which path a newline between two paths belongs to (it counts it in the earlier one,
which moves ``</Parallel>``). :func:`normalise_block_layout` rewrites exactly those joins and
nothing else: text inside a path or a summary, and around the block on the main line, is what the
model itself writes under fork-join, so it is kept byte for byte.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pr1_eval.protocol import tags as T

_WS = r"[ \t\r\n\f\v]+"
_JOINS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(re.escape(T.PARALLEL_OPEN) + _WS + f"(?={re.escape(T.PATH_OPEN)})"), T.PARALLEL_OPEN),
    (re.compile(re.escape(T.PATH_CLOSE) + _WS + f"(?={re.escape(T.PATH_OPEN)}|{re.escape(T.PARALLEL_CLOSE)})"),
     T.PATH_CLOSE),
    (re.compile(re.escape(T.PARALLEL_CLOSE) + r"[ \t\r\n\f\v]*" + f"(?={re.escape(T.SUMMARY_OPEN)})"),
     T.PARALLEL_CLOSE + "\n"),
)
JOIN_NAMES = ("<Parallel>…<Path>", "</Path>…<Path>", "</Path>…</Parallel>", "</Parallel>…<Summary>")


def normalise_block_layout(text: str) -> str:
    """``text`` with the joins of every block in fork-join's layout (see the module docstring)."""
    for pattern, replacement in _JOINS:
        text = pattern.sub(replacement, text)
    return text


@dataclass(frozen=True)
class JoinCounts:
    """How many joins of each kind differ from fork-join's layout."""

    parallel_path: int
    path_path: int
    path_parallel: int
    parallel_summary: int

    @property
    def total(self) -> int:
        return self.parallel_path + self.path_path + self.path_parallel + self.parallel_summary


def count_layout_deviations(text: str) -> JoinCounts:
    """Whitespace joins left between tags, and ``</Parallel>`` not followed by exactly
    ``\\n<Summary>`` when a ``<Summary>`` follows after only whitespace."""
    po, pc, ho, hc, so = (re.escape(t) for t in (T.PARALLEL_OPEN, T.PARALLEL_CLOSE, T.PATH_OPEN, T.PATH_CLOSE,
                                                 T.SUMMARY_OPEN))
    return JoinCounts(
        parallel_path=len(re.findall(po + _WS + ho, text)),
        path_path=len(re.findall(hc + _WS + ho, text)),
        path_parallel=len(re.findall(hc + _WS + pc, text)),
        parallel_summary=len(re.findall(pc + r"(?!\n" + so + r")[ \t\r\n\f\v]*" + so, text)),
    )
