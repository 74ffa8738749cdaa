"""Behaviour analysis of pr1-eval runs: how often and where models branch, how that drifts over
training, how different sibling paths are, and whether a block explores or verifies.

Reads runs only through :func:`analysis.runs.loader.load_runs`. ``pr1_eval`` never imports this
package (dependencies point one way). Names are resolved lazily so that registering the
``analyze`` command does not import pandas and scipy.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BLOCK_COLUMNS", "BLOCK_COLUMN_DOCS", "SAMPLE_COLUMNS", "SAMPLE_COLUMN_DOCS", "LoadedRuns", "load_runs"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from analysis.runs import loader

        return getattr(loader, name)
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")
