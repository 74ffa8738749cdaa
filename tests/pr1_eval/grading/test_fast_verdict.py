"""The number-against-rational-function verdict equals math-verify's own on thousands of
generated pairs: salad of symbols and numbers, fractions, powers, expressions that equal a number
only after cancelling (``\\frac{x^2-1}{x-1} - x`` = 1), and forms it must leave to math-verify."""

from __future__ import annotations

import random

from pr1_eval.grading.fast_verdict import decided
from pr1_eval.grading.verify import _parse, math_equal

_NUMBERS = ["12", "-3", "0", "1", "2", "7", "595", "\\frac{1}{2}", "-\\frac{3}{4}", "1/2", "\\dfrac{9}{7}", "10^{3}"]
_TERMS = ["\\frac{m}{n}", "x^2", "x^{-1}", "(x+1)^2", "m n", "2 x", "n", "x", "+", "-", "7", "5", "12", "3",
          "\\frac{x^2-1}{x-1}", "\\frac{2x}{x}", "(m-n)", "x^{3}"]
#: Equal to the number beside them only as rational functions (simplify is what math-verify uses).
_EQUAL = [("1", "\\frac{x^2-1}{x-1} - x"), ("2", "\\frac{2x}{x}"), ("1", "(x+1)^2 - x^2 - 2x"), ("0", "x - x"),
          ("\\frac{1}{2}", "\\frac{m}{2m}"), ("3", "\\frac{3 n^2}{n^2}"), ("-1", "\\frac{n-m}{m-n}")]
#: Not decided here: a Float, two expressions, bare symbols, constants, relations, sets.
_LEFT = [("0.5", "x"), ("x^2", "x \\cdot x"), ("12", "n"), ("3", "\\pi"), ("1", "e"), ("2", "x = 2"),
         ("1", "\\{1, 2\\}"), ("5", "\\sqrt{x}"), ("4", "x^{1000}"), ("1", "\\sin(x)")]


def _expression(rng: random.Random) -> str:
    return " ".join(rng.choice(_TERMS) for _ in range(rng.randint(1, 5))).strip(" +-") or "x"


def test_decided_equals_math_verify() -> None:
    rng = random.Random(11)
    pairs = [(rng.choice(_NUMBERS), _expression(rng)) for _ in range(1400)]
    pairs += [(b, a) for a, b in pairs[:1000]]  # math-verify is asymmetric: both orders
    pairs += _EQUAL + [(b, a) for a, b in _EQUAL]
    checked = equal = 0
    for gold, answer in pairs:
        verdict = decided(_parse(gold, 5), _parse(answer, 5))
        if verdict is None:
            continue
        checked += 1
        equal += verdict
        assert verdict == math_equal(gold, answer), (gold, answer)
    assert checked >= 2000 and equal >= len(_EQUAL) * 2


def test_other_forms_are_left_to_math_verify() -> None:
    for gold, answer in _LEFT:
        assert decided(_parse(gold, 5), _parse(answer, 5)) is None, (gold, answer)
        assert decided(_parse(answer, 5), _parse(gold, 5)) is None, (answer, gold)
    assert decided((), _parse("1", 5)) is None
