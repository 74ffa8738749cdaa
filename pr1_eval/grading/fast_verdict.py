"""math-verify's verdict on a number or a rational function against a rational function, without
``sympy.simplify``.

Why: in an analysis of sweep scale most equivalence checks are a number against an expression
in symbols (``12`` against ``\\frac{m}{n} 7`` or ``x^2``), and math-verify spends nine tenths
of such a check in ``simplify`` (about 10 ms of a worker's time) only to find they differ.
For these pairs its verdict is decided by rational-function arithmetic (``cancel``, under a
millisecond). :func:`pr1_eval.grading.verify.math_equal` (the grader's, the analysis' and the
RL reward's checker) asks :func:`decided` first, so every caller gets the same verdict sooner.

The argument, from math-verify's ``grader.py`` (``verify`` with its defaults, ``strict=True``):
``math_equal`` tries every pairing of the two parses (each ``[expression, matched string]``);
a string against an expression is never equal, two strings are equal when identical after
``strip`` (and non-empty). For a *number* ``N`` (``Integer``/``Rational``) against a *rational
function* ``R`` over the rationals (built from integers, rationals and plain ``Symbol`` s by
``Add``, ``Mul`` and ``Pow`` with a bounded integer exponent, not itself a bare ``Symbol``), in
either order, ``sympy_expr_eq`` goes: no relation, set, tuple or symbol branch applies;
``sympy_str_eq`` is structural ``==``; ``sympy_numeric_eq`` takes its ``Number`` branch, where
without a ``Float`` it compares ``==`` (of ``doit()`` results); then ``sympy_symbolic_eq``
answers ``simplify(N - R).is_zero``. Each step is true only when ``N`` and ``R`` are equal as
rational functions, and when they are ``simplify`` returns ``0`` (``cancel``, which it tries,
gives ``0`` and nothing measures shorter). So the verdict is ``cancel(N - R) == 0``.

For *two rational functions* ``G`` (gold) and ``A``, neither a number nor a bare symbol (both
far more common in an analysis than a grader: ``\frac{m}{n}`` against ``x^2``), the same steps
run, except that ``sympy_numeric_eq`` takes its last branch (neither side is a number or a
percentage of one) and answers ``(G - A).evalf(chop=True, n=15) == 0``, which also calls a
difference zero whose coefficients are all below the precision. So the verdict is: the strings
agree, or ``cancel(G - A) == 0`` (then ``simplify`` gives ``0``), or that ``evalf`` is zero — the
one branch repeated here as math-verify writes it. When ``G - A`` is not zero as a rational
function, ``simplify`` returns an equal expression, which is not zero either, so nothing else
can say equal.

The one thing this changes is time: where math-verify's ``simplify`` would overrun its alarm
(``timeout``), this answers. Checked against math-verify itself on thousands of generated pairs
(``tests/pr1_eval/grading/test_fast_verdict.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

#: Largest integer exponent accepted (bounds the work of ``cancel`` on ``x^{1000000}``).
MAX_EXPONENT = 64


def decided(gold_parsed: Sequence[Any], answer_parsed: Sequence[Any]) -> bool | None:
    """``math_equal``'s verdict from the two math-verify parses when the module docstring's
    argument covers them (exactly one expression in each parse: a number against a rational
    function, or two rational functions), else ``None`` (run math-verify)."""
    from sympy import Number, cancel

    gold_exprs = [e for e in gold_parsed if not isinstance(e, str)]
    answer_exprs = [e for e in answer_parsed if not isinstance(e, str)]
    if len(gold_exprs) != 1 or len(answer_exprs) != 1:
        return None
    gold, answer = gold_exprs[0], answer_exprs[0]
    if not (_is_rational_function(gold) and _is_rational_function(answer)):
        return None
    if _same_string(gold_parsed, answer_parsed):
        return True
    if not _differ_at_a_point(gold, answer):  # else they differ as rational functions: cancel would not give 0
        difference = cancel(gold - answer)
        if isinstance(difference, Number) and difference == 0:
            return True
    if _is_number(gold) or _is_number(answer):
        return False
    return _numerically_zero(gold, answer)


#: The point at which two rational functions are first compared, one value per symbol in name
#: order: any point serves (a difference there proves them different), so these need only be
#: unlikely roots of the differences seen.
_POINT = tuple(Fraction(p, q) for p, q in ((7, 3), (11, 5), (-13, 7), (17, 11), (19, 13), (-23, 17), (29, 19),
                                            (31, 23), (-37, 29), (41, 31), (43, 37), (-47, 41)))


def _differ_at_a_point(gold: Any, answer: Any) -> bool:
    """Whether the two rational functions take different values at :data:`_POINT`, by exact rational
    arithmetic: if so they are not equal (their ``cancel`` difference is not ``0``); ``False`` when
    either is undefined there, when they agree there, or past the point's symbols (then ``cancel`` decides)."""
    names = sorted({s.name for s in (gold.free_symbols | answer.free_symbols)})
    if len(names) > len(_POINT):
        return False
    point = dict(zip(names, _POINT, strict=False))
    try:
        return _value(gold, point) != _value(answer, point)
    except ZeroDivisionError:
        return False


def _value(expr: Any, point: dict[str, Fraction]) -> Fraction:
    """The exact value of a rational function (:func:`_rational_tree`) at ``point``."""
    from sympy import Add, Mul, Pow, Rational, Symbol

    if isinstance(expr, Rational):
        return Fraction(int(expr.p), int(expr.q))
    if type(expr) is Symbol:
        return point[expr.name]
    if isinstance(expr, Pow):
        return _value(expr.base, point) ** int(expr.exp)
    values = [_value(arg, point) for arg in expr.args]
    if type(expr) is Add:
        return sum(values, Fraction(0))
    if type(expr) is Mul:
        product = Fraction(1)
        for value in values:
            product *= value
        return product
    raise TypeError(f"not a rational function: {type(expr).__name__}")


def _numerically_zero(gold: Any, answer: Any) -> bool:
    """The last branch of math-verify's ``sympy_numeric_eq`` (``numeric_precision=15``), as it is
    written there: a failure is "not equal"."""
    try:
        return bool((gold - answer).evalf(chop=True, n=15) == 0)
    except Exception:  # noqa: BLE001 - math-verify counts a failed evaluation as unequal
        return False


def _same_string(gold_parsed: Sequence[Any], answer_parsed: Sequence[Any]) -> bool:
    """The string pairings of math-verify's ``verify``: equal when identical and non-empty."""
    golds = [g.strip() for g in gold_parsed if isinstance(g, str)]
    return any(g and g == t.strip() for g in golds for t in answer_parsed if isinstance(t, str))


def _is_number(expr: Any) -> bool:
    """An exact rational number (``Integer`` is a ``Rational``; a ``Float`` is not)."""
    from sympy import Rational

    return isinstance(expr, Rational)


def _is_rational_function(expr: Any) -> bool:
    """Built from integers, rationals and plain symbols by ``+``, ``*`` and bounded integer powers
    (no zero base under a negative power), and not a bare symbol."""
    from sympy import Symbol

    return not isinstance(expr, Symbol) and _rational_tree(expr, 0)


def _rational_tree(expr: Any, depth: int) -> bool:
    from sympy import Add, Integer, Mul, Pow, Rational, Symbol

    if depth > 200:
        return False
    if isinstance(expr, (Integer, Rational)):
        return True
    if type(expr) is Symbol:  # not Dummy/Wild, no function application
        return True
    if isinstance(expr, Pow):
        exp = expr.exp
        if not isinstance(exp, Integer) or abs(int(exp)) > MAX_EXPONENT:
            return False
        if int(exp) < 0 and isinstance(expr.base, (Integer, Rational)) and expr.base == 0:
            return False
        return _rational_tree(expr.base, depth + 1)
    if type(expr) in (Add, Mul):
        return all(_rational_tree(arg, depth + 1) for arg in expr.args)
    return False
