"""The six Parallel-R1 tags (their home is :mod:`pr1_eval.protocol.tags`; kept as a short import)."""

from __future__ import annotations

from pr1_eval.protocol.tags import (
    ALL_TAGS,
    PARALLEL_CLOSE,
    PARALLEL_OPEN,
    PATH_CLOSE,
    PATH_OPEN,
    SUMMARY_CLOSE,
    SUMMARY_OPEN,
)

__all__ = ["ALL_TAGS", "PARALLEL_CLOSE", "PARALLEL_OPEN", "PATH_CLOSE", "PATH_OPEN", "SUMMARY_CLOSE", "SUMMARY_OPEN"]
