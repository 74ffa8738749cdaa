"""lm-evaluation-harness task definitions for pr1-eval's benchmarks.

lm-eval 0.4.13 registers external tasks only by directory (``--include_path DIR`` or
``TaskManager(include_path=DIR)``), so this package is that directory: the YAML files here
define ``pr1_aime24``, ``pr1_aime25``, ``pr1_amc23``, ``pr1_math500``, ``pr1_math300``,
``pr1_gsm8k``, the group ``pr1_math`` and its greedy variant ``pr1_math_greedy``, and ``utils.py`` holds the ``!function`` hooks, which call pr1-eval's own
data loading, prompt template, grader and metric code (one implementation, never a copy).
See ``README.md`` beside this file for the commands.
"""

from __future__ import annotations

from pathlib import Path

#: The lm-eval task names defined here, mapped to the pr1-eval task each one evaluates.
LM_EVAL_TASKS: dict[str, str] = {
    "pr1_aime24": "aime24",
    "pr1_aime25": "aime25",
    "pr1_amc23": "amc23",
    "pr1_math500": "math500",
    "pr1_math300": "math300_pr1",
    "pr1_gsm8k": "gsm8k",
}
#: The group that runs the default benchmark set (MATH-500 rather than its 316-problem subset).
GROUP = "pr1_math"
#: The same benchmarks greedily: one response per problem at temperature 0 (``repeats: 1``).
GREEDY_GROUP = "pr1_math_greedy"


def include_path() -> str:
    """The directory to pass to ``lm_eval --include_path`` (what ``pr1-eval lm-eval-path`` prints)."""
    return str(Path(__file__).resolve().parent)
