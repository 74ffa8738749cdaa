"""The six Parallel-R1 tags, in one place.

Every stage (structure parsing, decoding, masks, rewards, tokenizer building) must agree on
the exact tag strings; they are single special tokens in Parallel-R1 checkpoints.
"""

from __future__ import annotations

PARALLEL_OPEN = "<Parallel>"
PARALLEL_CLOSE = "</Parallel>"
PATH_OPEN = "<Path>"
PATH_CLOSE = "</Path>"
SUMMARY_OPEN = "<Summary>"
SUMMARY_CLOSE = "</Summary>"

ALL_TAGS: tuple[str, ...] = (
    PARALLEL_OPEN,
    PARALLEL_CLOSE,
    PATH_OPEN,
    PATH_CLOSE,
    SUMMARY_OPEN,
    SUMMARY_CLOSE,
)
