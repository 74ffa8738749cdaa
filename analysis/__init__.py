"""Behaviour analysis of pr1-eval runs: how often and where models branch, how that drifts over
training, how different sibling paths are, and whether a block explores or verifies.

Reads runs only through :func:`analysis.loader.load_runs`. ``pr1_eval`` never imports this
package (dependencies point one way).
"""

from analysis.loader import BLOCK_COLUMN_DOCS, BLOCK_COLUMNS, SAMPLE_COLUMN_DOCS, SAMPLE_COLUMNS, LoadedRuns, load_runs

__all__ = ["BLOCK_COLUMNS", "BLOCK_COLUMN_DOCS", "SAMPLE_COLUMNS", "SAMPLE_COLUMN_DOCS", "LoadedRuns", "load_runs"]
