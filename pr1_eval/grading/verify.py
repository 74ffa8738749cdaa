"""Math equivalence by math-verify, as a grading worker process runs it.

math-verify bounds its own parse and compare steps with ``signal.alarm``, which only works on
a process's main thread, and some inputs still hang in C code that never returns to Python.
So the calls here run on the main thread of a dedicated worker process (:mod:`.pool` starts,
watches and kills those); the inner alarms turn most slow inputs into a clean ``timeout``
verdict without losing the worker, and the pool's kill covers the rest.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from functools import lru_cache
from typing import Any, NamedTuple

from pr1_eval.grading.fast_verdict import decided

#: Environment variable that, set to "1" when a pool starts, arms the test-only answers below.
TEST_HOOKS_ENV = "PR1_EVAL_GRADING_TEST_HOOKS"
#: With test hooks armed, a worker given this answer sleeps forever (a hang no alarm breaks).
HANG_ANSWER = "PR1EVALTESTHANG"
#: With test hooks armed, a worker given this answer dies at once (exit status 3).
CRASH_ANSWER = "PR1EVALTESTCRASH"
#: With test hooks armed, a worker given this answer raises an exception while grading.
RAISE_ANSWER = "PR1EVALTESTRAISE"

_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
#: A whole number written with spaces between groups of three digits (``1 000``, ``7 425 000``).
_SPACED_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?: \d{3})+(?![\d.,])")
#: A whole number with commas (or TeX's ``{,}``) between groups of three digits (``1,000``, ``12{,}345``).
_COMMA_THOUSANDS = re.compile(r"(?<![\d.])[1-9]\d{0,2}(?:(?:,|\{,\})\d{3})+(?!\d)(?!(?:,|\{,\})\d)")
_DIGIT_COMMA_DIGIT = re.compile(r"\d(?:,|\{,\})(?=\d)")
_BRACKETS = ("(", "[", "\\{")
#: Parses a process keeps (:func:`_parse`); the pool routes items by what each worker holds.
PARSE_CACHE_SIZE = 4096


class Verdict(NamedTuple):
    """One equivalence check: ``status`` is 'ok', 'timeout' or 'error'; ``correct`` is the
    verdict when 'ok', else ``None``; ``error`` says why it is not 'ok'."""

    status: str
    correct: bool | None
    error: str | None = None


class VerifyTimeout(Exception):
    """A math-verify step hit its alarm and no comparison had succeeded."""


def as_math(text: str) -> str:
    """``text`` as one inline-math span, so bare LaTeX (``\\dfrac{9}{7}``) parses as LaTeX and
    ``10\\%`` keeps its meaning; stray unescaped ``$`` inside are dropped first, and spaces that
    separate thousands are closed up (in math, ``1 000`` would read as the product ``1·000``)."""
    text = _UNESCAPED_DOLLAR.sub("", text.strip())
    text = join_comma_thousands(text)
    return "$" + _SPACED_THOUSANDS.sub(lambda m: m.group(0).replace(" ", ""), text) + "$"


def join_comma_thousands(text: str) -> str:
    """``text`` with comma thousands separators removed where they can only be separators.

    math-verify reads a bare ``1,000`` as 1000 but ``x = 1,000``, ``1{,}000`` inside an equation, or
    ``\\{1,000, 2,000\\}`` as tuples of 1 and 0 — false negatives against 1000. A group is joined
    only when every digit-comma-digit in ``text`` belongs to a ``d,ddd(,ddd)*`` number (so
    ``1,000,2`` and ``1,2`` stay lists), and, inside brackets, only when the elements are separated by
    a comma *and a space* elsewhere (``(3,125)`` stays the pair, ``(1,000, 2)`` becomes ``(1000, 2)``).
    """
    numbers = [m.span() for m in _COMMA_THOUSANDS.finditer(text)]
    if not numbers:
        return text
    for match in _DIGIT_COMMA_DIGIT.finditer(text):
        if not any(a <= match.start() < b for a, b in numbers):
            return text
    if any(b in text for b in _BRACKETS) and ", " not in text:
        return text
    return _COMMA_THOUSANDS.sub(lambda m: m.group(0).replace("{,}", "").replace(",", ""), text)


def _config() -> list[Any]:
    """math-verify's default targets, LaTeX then plain expressions (imported lazily: the parent
    process never needs math-verify)."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    return [LatexExtractionConfig(), ExprExtractionConfig()]


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _parse(text: str, op_timeout: int) -> tuple[Any, ...]:
    """math-verify's parse of ``text`` (cached: the same gold is checked k times).

    A timeout raises :class:`VerifyTimeout` (and is therefore not cached); other parse errors
    give an empty parse, as math-verify's own ``raise_on_error=False`` would.
    """
    from math_verify import parse
    from math_verify.errors import TimeoutException

    try:
        return tuple(parse(as_math(text), extraction_config=_config(), parsing_timeout=op_timeout, raise_on_error=True))
    except TimeoutException as exc:
        raise VerifyTimeout(f"math-verify parse timed out after {op_timeout}s") from exc
    except Exception:  # noqa: BLE001 - unparsable text is simply not equal to anything
        return ()


def math_equal(gold: str, answer: str, op_timeout: int = 5) -> bool:
    """Whether ``answer`` equals ``gold`` by math-verify (``gold`` first: verify is asymmetric).

    Same result as ``verify(parse(gold), parse(answer))`` (a number against a rational function
    is decided by :mod:`.fast_verdict` without sympy's ``simplify``, with math-verify's verdict),
    except that a step that timed out raises :class:`VerifyTimeout` instead of silently counting
    as unequal, unless another comparison already succeeded. Must run on a main thread (math-verify uses SIGALRM).
    """
    from math_verify import verify
    from math_verify.errors import TimeoutException

    gold_parsed = _parse(gold, op_timeout)
    answer_parsed = _parse(answer, op_timeout)
    quick = decided(gold_parsed, answer_parsed)  # a number against a rational function: no simplify
    if quick is not None:
        return quick
    timed_out = False
    for g in gold_parsed:
        for t in answer_parsed:
            try:
                if verify(g, t, timeout_seconds=op_timeout, raise_on_error=True):
                    return True
            except TimeoutException:
                timed_out = True
            except Exception:  # noqa: BLE001,S112 - math-verify counts a failed comparison as unequal
                continue
    if timed_out:
        raise VerifyTimeout(f"math-verify comparison timed out after {op_timeout}s")
    return False


def verify_pair(gold: str, answer: str, op_timeout: int = 5, test_hooks: bool = False) -> Verdict:
    """:func:`math_equal` as a :class:`Verdict`; never raises (except for the crash hook).

    Off the main thread math-verify's alarms fail and it would quietly answer "unequal", so
    that case is reported as an error instead; use the worker pool from threads.
    """
    if threading.current_thread() is not threading.main_thread():
        return Verdict("error", None, "math-verify needs the main thread (SIGALRM); grade through the pool")
    try:
        if test_hooks:
            _run_test_hook(answer)
        return Verdict("ok", math_equal(gold, answer, op_timeout))
    except VerifyTimeout as exc:
        return Verdict("timeout", None, str(exc))
    except RecursionError:
        return Verdict("error", None, "RecursionError in math-verify")
    except Exception as exc:  # noqa: BLE001 - any failure is reported per item
        return Verdict("error", None, f"{type(exc).__name__}: {exc}"[:500])


def _run_test_hook(answer: str) -> None:
    """Simulate the failures the pool must survive (only when test hooks are armed)."""
    if answer == HANG_ANSWER:
        while True:  # a hang that no alarm interrupts
            signal.alarm(0)
            time.sleep(3600)
    if answer == CRASH_ANSWER:
        os._exit(3)
    if answer == RAISE_ANSWER:
        raise RuntimeError("test hook: grading raised")


def inner_timeout(timeout_s: float) -> int:
    """Whole seconds for each math-verify step: a third of the per-item budget (at least 1),
    so several steps fit before the pool kills the worker."""
    return max(1, int(timeout_s / 3))
