"""What a ``--limit`` run says about itself: lm-eval's warning and the mark beside its numbers.

Why a module of its own: ``run``/``sweep`` print the warning and the report, the leaderboard and the
dashboard mark the run (:mod:`pr1_eval.report.completeness` says when a run is limited); the command
modules must not import the report's pandas code just to name two strings.
"""

from __future__ import annotations

#: lm-eval's words for a ``--limit`` run, printed at run time and under every report of one.
LIMIT_WARNING = "--limit SHOULD ONLY BE USED FOR TESTING. REAL METRICS SHOULD NOT BE COMPUTED USING LIMIT."
#: What a table or page prints beside the numbers of a ``--limit`` run (as ``⚠ incomplete`` for a partial one).
LIMIT_MARK = "⚠ --limit"
#: ``run.json`` key (kept in ``RunRecord.extra``): task → problems the task has before ``--limit``.
LIMIT_SIZES_KEY = "limit_task_sizes"
