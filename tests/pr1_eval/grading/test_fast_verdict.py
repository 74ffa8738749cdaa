"""The fast verdicts equal math-verify's own (its ``verify`` over every pairing of the parses, not
:func:`math_equal`, which asks :func:`decided` first) on thousands of generated pairs: a number
against salad of symbols and numbers, fractions, powers, expressions that equal a number only after
cancelling (``\\frac{x^2-1}{x-1} - x`` = 1); two such expressions, equal after expanding or
cancelling, or apart by less than the precision math-verify evaluates at; and forms it must leave
to math-verify."""

from __future__ import annotations

import random

from math_verify import verify

from pr1_eval.grading.fast_verdict import decided
from pr1_eval.grading.verify import _parse

_NUMBERS = ["12", "-3", "0", "1", "2", "7", "595", "\\frac{1}{2}", "-\\frac{3}{4}", "1/2", "\\dfrac{9}{7}", "10^{3}"]
_TERMS = ["\\frac{m}{n}", "x^2", "x^{-1}", "(x+1)^2", "m n", "2 x", "n", "x", "+", "-", "7", "5", "12", "3",
          "\\frac{x^2-1}{x-1}", "\\frac{2x}{x}", "(m-n)", "x^{3}"]
#: Equal to the number beside them only as rational functions (simplify is what math-verify uses).
_EQUAL = [("1", "\\frac{x^2-1}{x-1} - x"), ("2", "\\frac{2x}{x}"), ("1", "(x+1)^2 - x^2 - 2x"), ("0", "x - x"),
          ("\\frac{1}{2}", "\\frac{m}{2m}"), ("3", "\\frac{3 n^2}{n^2}"), ("-1", "\\frac{n-m}{m-n}")]
#: Two expressions that math-verify calls equal: as rational functions, or numerically (a
#: difference below its 15 digits).
_BOTH_EQUAL = [("x^2", "x \\cdot x"), ("(x+1)^2", "x^2 + 2x + 1"), ("\\frac{m}{n}", "\\frac{2m}{2n}"),
               ("\\frac{x^2-1}{x-1}", "x + 1"), ("2x + 10^{-20}", "2x"), ("2x + 10^{-20} m", "2x"),
               ("\\frac{m}{n} - \\frac{n}{m}", "\\frac{m^2 - n^2}{m n}")]
#: Apart by a small amount that math-verify's evaluation keeps: not equal.
_TINY_APART = [("m n + 10^{-30} x", "m n"), ("\\frac{m}{n} + 10^{-16}", "\\frac{m}{n}"), ("x^2 + 10^{-10}", "x^2")]
#: Not decided here: a Float, bare symbols, constants, relations, sets.
_LEFT = [("0.5", "x"), ("x^2", "n"), ("12", "n"), ("3", "\\pi"), ("1", "e"), ("2", "x = 2"),
         ("1", "\\{1, 2\\}"), ("5", "\\sqrt{x}"), ("4", "x^{1000}"), ("1", "\\sin(x)")]


def _expression(rng: random.Random) -> str:
    return " ".join(rng.choice(_TERMS) for _ in range(rng.randint(1, 5))).strip(" +-") or "x"


def _math_verify(gold: str, answer: str) -> bool:
    """math-verify's verdict, as :func:`pr1_eval.grading.verify.math_equal` asks it after :func:`decided`."""
    for g in _parse(gold, 5):
        for t in _parse(answer, 5):
            try:
                if verify(g, t, timeout_seconds=30, raise_on_error=True):
                    return True
            except Exception:  # noqa: BLE001,S112 - a failed comparison is unequal, as in math_equal
                continue
    return False


def _checked(pairs: list[tuple[str, str]]) -> tuple[int, int]:
    """How many of ``pairs`` :func:`decided` answers, and how many of those as equal; each answer
    asserted equal to math-verify's."""
    checked = equal = 0
    for gold, answer in pairs:
        verdict = decided(_parse(gold, 5), _parse(answer, 5))
        if verdict is None:
            continue
        checked += 1
        equal += verdict
        assert verdict == _math_verify(gold, answer), (gold, answer)
    return checked, equal


def test_number_against_expression_equals_math_verify() -> None:
    rng = random.Random(11)
    pairs = [(rng.choice(_NUMBERS), _expression(rng)) for _ in range(1400)]
    pairs += [(b, a) for a, b in pairs[:1000]]  # math-verify is asymmetric: both orders
    pairs += _EQUAL + [(b, a) for a, b in _EQUAL]
    checked, equal = _checked(pairs)
    assert checked >= 2000 and equal >= len(_EQUAL) * 2


def test_two_expressions_equal_math_verify() -> None:
    rng = random.Random(12)
    pairs = [(_expression(rng), _expression(rng)) for _ in range(600)]
    pairs += [(a, a) for a, _ in pairs[:50]] + _BOTH_EQUAL + [(b, a) for a, b in _BOTH_EQUAL]
    checked, equal = _checked(pairs)
    assert checked >= 500 and equal >= 50 + len(_BOTH_EQUAL) * 2
    for gold, answer in _BOTH_EQUAL:  # every one of them is decided, and decided equal
        assert decided(_parse(gold, 5), _parse(answer, 5)) is True, (gold, answer)
    assert _checked(_TINY_APART + [(b, a) for a, b in _TINY_APART]) == (2 * len(_TINY_APART), 0)


def test_other_forms_are_left_to_math_verify() -> None:
    for gold, answer in _LEFT:
        assert decided(_parse(gold, 5), _parse(answer, 5)) is None, (gold, answer)
        assert decided(_parse(answer, 5), _parse(gold, 5)) is None, (answer, gold)
    assert decided((), _parse("1", 5)) is None


def test_a_difference_at_the_point_means_cancel_is_not_zero() -> None:
    """The first comparison at one exact point only ever rules equality out: on generated pairs,
    wherever it says the two differ, ``cancel`` of their difference is not zero, and it says so for
    most unequal pairs (else it would save nothing)."""
    from sympy import cancel

    from pr1_eval.grading.fast_verdict import _differ_at_a_point, _is_rational_function

    rng = random.Random(13)
    pairs = [(_expression(rng), _expression(rng)) for _ in range(400)] + _BOTH_EQUAL + _EQUAL
    differ = unequal = 0
    for gold, answer in pairs:
        g, a = _parse(gold, 5)[0], _parse(answer, 5)[0]
        if isinstance(g, str) or isinstance(a, str) or not (_is_rational_function(g) and _is_rational_function(a)):
            continue
        zero = cancel(g - a) == 0
        unequal += not zero
        if _differ_at_a_point(g, a):
            differ += 1
            assert not zero, (gold, answer)
    assert unequal > 200 and differ >= 0.95 * unequal
