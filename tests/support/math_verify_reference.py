"""math-verify as other harnesses call it, for the tests that measure pr1-eval against it on the
public grader suites' cases (``tests/pr1_eval/grading/test_reference_cases.py`` and
``test_heldout_cases.py``): ``verify(parse(gold), parse(prediction))`` with a bare gold put in
``$…$``, so both sets are measured against the same reference call.
"""

from __future__ import annotations

from typing import Any

REFERENCE_TIMEOUT_S = 60
_MATH_DELIMITERS = ("$", "\\(", "\\[")


def harness_gold(gold: str) -> str:
    """The gold as harnesses hand it to math-verify: in ``$…$`` unless it already holds math."""
    return gold if any(d in gold for d in _MATH_DELIMITERS) else f"${gold}$"


def math_verify(gold: str, prediction: str, targets: list[Any] | None = None, **settings: Any) -> bool:
    """``verify(parse(gold), parse(prediction))`` with math-verify's defaults, but a 60 s budget per
    step instead of 5 s: on a loaded machine a wall-clock timeout reads as "unequal" and would
    flip a pinned count (what the budget changes is only whether a slow step finishes)."""
    from math_verify import parse, verify

    kw: dict[str, Any] = {"parsing_timeout": REFERENCE_TIMEOUT_S}
    if targets is not None:
        kw["extraction_config"] = targets
    return bool(verify(parse(gold, **kw), parse(prediction, **kw), timeout_seconds=REFERENCE_TIMEOUT_S, **settings))
