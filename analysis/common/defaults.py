"""Defaults shared by the analyze command and the analysis modules.

They live apart from both so that the light command module (imported on every ``pr1-eval``
start) and the embedding model module depend on this leaf instead of on each other.
"""

from __future__ import annotations

DEFAULT_OUT = "pr1-analysis"
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
#: How the leaderboard averages over tasks (the first is the default).
AVERAGES = ("task_mean", "problem_weighted")
#: The option every surface names when it leaves incomplete runs out of trends and rankings.
INCLUDE_FLAG = "--include-incomplete"
