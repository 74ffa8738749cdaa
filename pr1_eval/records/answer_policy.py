"""The answer policies by name: what ``run.json`` records, the CLI offers and tables print.

The readings themselves are :mod:`pr1_eval.grading.policy`; the names, their one-line summaries and
the default per prompt template live here, below the grader, so that building the command line,
reading a run record and printing a table need not load the grading package. Why the two policies
and these defaults: the module docstring of :mod:`pr1_eval.grading.policy`.
"""

from __future__ import annotations

from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol.paper_settings import PAPER_PROMPT

#: The answer policies, the default first.
ANSWER_POLICIES: tuple[str, ...] = ("paper", "lenient")
#: What a run that records no policy was graded under (every run before policies existed).
DEFAULT_POLICY = "paper"
#: One line per policy, for ``--help``, table headers and the docs.
POLICY_SUMMARIES: dict[str, str] = {
    "paper": "the last Final Answer: line, else the last \\boxed{} (the paper's reading)",
    "lenient": "the last \\boxed{}, else the last Final Answer: line, else the final sentence's value "
               "(the reading of math-verify, lighteval and lm-eval)",
}
#: Prompt templates whose default policy is not ``lenient``.
_TEMPLATE_DEFAULTS: dict[str, str] = {PAPER_PROMPT: "paper"}


def check_policy(policy: str, where: str = "--answer-policy") -> str:
    """``policy`` when it names one of :data:`ANSWER_POLICIES`, else a one-line error saying which exist."""
    if policy not in ANSWER_POLICIES:
        raise Pr1EvalError(f"{where}: unknown answer policy {policy!r}; use one of {', '.join(ANSWER_POLICIES)}")
    return policy


def default_policy(template_name: str | None) -> str:
    """The policy a run with prompt template ``template_name`` is graded under unless told otherwise:
    ``paper`` for the paper's prompt, ``lenient`` for every other (``None``: :data:`DEFAULT_POLICY`)."""
    if template_name is None:
        return DEFAULT_POLICY
    return _TEMPLATE_DEFAULTS.get(template_name, "lenient")
