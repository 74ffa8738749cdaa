"""An interval stated as an inequality or in words, read as the interval itself.

Why: math-verify, given ``x > 2`` as the answer and ``(2, \\infty)`` as the gold, says wrong (it
compares a relation with a set), and given ``all real numbers greater than 2`` it reads ``2``; yet
given the interval as the answer it accepts a gold written either way (``verify(parse("$x>2$"),
parse("$(2,\\infty)$"))`` is true). So an answer that *is* an interval of one unknown is handed
over as the interval: a one-unknown inequality (``x \\geq 2``, ``-1 < x \\leq 3``, ``x \\neq 1``) and
the English phrasings of the same sets (``all real numbers``, ``… greater than 2``, ``at most 3``,
``except 1``, ``between 1 and 5, inclusive``). A phrase that is not one of these (``x is not
greater than 2``) is not read here, so the negation rules still see it. The bounds are values
(digits or LaTeX commands, no other letters): ``x > y`` is a relation between unknowns, left alone.
"""

from __future__ import annotations

import re

_VAR = r"[A-Za-z](?:_\{?[A-Za-z0-9]{1,4}\}?)?"
_OP = r"(\\geqslant|\\leqslant|\\geq|\\leq|\\neq|\\ge|\\le|\\ne|\\gt|\\lt|>=|<=|!=|[<>≤≥≠])(?![A-Za-z])"
_BOUND = r"([^<>=≤≥≠,;]{1,80}?)"
_ONE_SIDE_RE = re.compile(rf"\s*{_VAR}\s*{_OP}\s*{_BOUND}\s*")
_FLIPPED_RE = re.compile(rf"\s*{_BOUND}\s*{_OP}\s*{_VAR}\s*")
_TWO_SIDES_RE = re.compile(rf"\s*{_BOUND}\s*{_OP}\s*{_VAR}\s*{_OP}\s*{_BOUND}\s*")
_KIND = {"\\geqslant": ">=", "\\geq": ">=", "\\ge": ">=", ">=": ">=", "≥": ">=",
         "\\leqslant": "<=", "\\leq": "<=", "\\le": "<=", "<=": "<=", "≤": "<=",
         "\\neq": "!=", "\\ne": "!=", "!=": "!=", "≠": "!=", ">": ">", "\\gt": ">", "<": "<", "\\lt": "<"}
_FLIP = {">": "<", "<": ">", ">=": "<=", "<=": ">=", "!=": "!="}

_WORD_VAR = rf"(?:\$\s*{_VAR}\s*\$|{_VAR})"
_LEAD_RE = re.compile(
    rf"\s*(?:(?:the\s+)?set\s+of\s+)?(?:all|any|every)\s+(?:real\s+(?:numbers?|values?)|reals|(?:real\s+)?values\s+of"
    rf"\s+{_WORD_VAR}|{_WORD_VAR})(?:\s+{_WORD_VAR})?"
    rf"(?:\s*,?\s*(?:such\s+that|so\s+that|where|with|that\s+are|which\s+are|that\s+is|which\s+is)(?:\s+{_WORD_VAR})?"
    rf"(?:\s+(?:is|are))?)?(?:\s+|$)"
    rf"|\s*{_WORD_VAR}\s+(?:is|are|must\s+be|can\s+be\s+any\s+(?:real\s+)?number)(?:\s+|$)",
    re.IGNORECASE,
)
_VALUE = rf"(\$[^$]{{1,80}}\$|(?:{_VAR}\s*=\s*)?[-+]?\s*[^\s$]{{1,40}})"
_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern + r"\s*[.;]?\s*", re.IGNORECASE), shape)
    for pattern, shape in (
        (rf"(?:greater|larger|bigger|more)\s+than\s+or\s+equal\s+to\s+{_VALUE}|at\s+least\s+{_VALUE}"
         rf"|no\s+less\s+than\s+{_VALUE}", "[{a}, \\infty)"),
        (rf"(?:greater|larger|bigger|more)\s+than\s+{_VALUE}|above\s+{_VALUE}|exceeding\s+{_VALUE}", "({a}, \\infty)"),
        (rf"(?:less|smaller)\s+than\s+or\s+equal\s+to\s+{_VALUE}|at\s+most\s+{_VALUE}"
         rf"|no\s+(?:more|greater|larger)\s+than\s+{_VALUE}", "(-\\infty, {a}]"),
        (rf"(?:less|smaller)\s+than\s+{_VALUE}|below\s+{_VALUE}", "(-\\infty, {a})"),
        (rf"(?:except(?:\s+for)?|other\s+than|not\s+equal\s+to|different\s+from)\s+{_VALUE}",
         "(-\\infty, {a}) \\cup ({a}, \\infty)"),
        (rf"between\s+{_VALUE}\s+and\s+{_VALUE}\s*,?\s*\(?\s*inclusive\s*\)?", "[{a}, {b}]"),
        (rf"between\s+{_VALUE}\s+and\s+{_VALUE}(?:\s*,?\s*\(?\s*exclusive\s*\)?)?", "({a}, {b})"),
    )
)

#: The empty set as a symbol (math-verify reads ``\\varnothing`` and ``∅`` as unequal to ``\\emptyset``).
_EMPTY_SYMBOLS = frozenset({"\\varnothing", "\\emptyset", "∅"})
_WORD_UNKNOWN = r"\$?[A-Za-z]\$?"
_NO_WHAT = (rf"(?:(?:real|possible|valid)\s+)?(?:solutions?|roots?|values?(?:\s+of\s+{_WORD_UNKNOWN})?)"
            rf"|such\s+{_WORD_UNKNOWN}")
#: The whole answer says there is nothing: ``no solution``, ``there are no real roots``, ``the empty set``.
_EMPTY_SET_RE = re.compile(
    rf"(?:there\s+(?:is|are|exists?)\s+)?no\s+(?:{_NO_WHAT})(?:\s+exists?)?"
    r"|(?:the\s+)?(?:solution\s+set\s+is\s+)?(?:the\s+)?empty(?:\s+set)?"
    r"|(?:the\s+)?(?:equation|system|inequality)\s+has\s+no\s+(?:real\s+)?solutions?",
    re.IGNORECASE,
)


def interval_of_inequality(text: str) -> str | None:
    """The interval a one-unknown inequality states (``x > 2`` → ``(2, \\infty)``), else ``None``."""
    if len(text) > 200:
        return None
    two = _TWO_SIDES_RE.fullmatch(text)
    if two is not None:
        low, op1, op2, high = two.group(1), _KIND[two.group(2)], _KIND[two.group(3)], two.group(4)
        if op1 in ("<", "<=") and op2 in ("<", "<=") and _is_bound(low) and _is_bound(high):
            return f"{'[' if op1 == '<=' else '('}{low.strip()}, {high.strip()}{']' if op2 == '<=' else ')'}"
        return None
    one = _ONE_SIDE_RE.fullmatch(text)
    if one is not None:
        return _one_sided(_KIND[one.group(1)], one.group(2))
    flipped = _FLIPPED_RE.fullmatch(text)
    if flipped is not None:
        return _one_sided(_FLIP[_KIND[flipped.group(2)]], flipped.group(1))
    return None


def interval_in_words(text: str) -> str | None:
    """The interval an English phrase states (``all real numbers greater than 2`` →
    ``(2, \\infty)``), else ``None``; the condition may also be an inequality (``all real numbers
    $x$ such that $x > 2$``)."""
    if len(text) > 300:
        return None
    s = text.strip().rstrip(".").strip()
    lead = _LEAD_RE.match(s)
    if lead is None:
        return None
    rest = s[lead.end():].strip()
    if not rest:
        return "(-\\infty, \\infty)" if re.search(r"real|reals", lead.group(0), re.IGNORECASE) else None
    for pattern, shape in _PHRASES:
        match = pattern.fullmatch(rest)
        if match is not None:
            a, *more = [_unwrap(g) for g in match.groups() if g is not None]
            if _is_bound(a) and all(_is_bound(b) for b in more):
                return shape.format(a=a, b=more[0] if more else "")
            return None
    return interval_of_inequality(rest.replace("$", ""))


def empty_set_in_words(text: str) -> str | None:
    """``\\emptyset`` when the whole of ``text`` says the solution set is empty (``no solution``,
    ``There are no real solutions.``, ``the empty set``, ``\\text{No solution}``, ``\\varnothing``),
    else ``None``. Why: math-verify reads the words as a product of symbols and ``\\varnothing`` as
    unequal to ``\\emptyset``, so a right "no solution" never matches a gold ``\\emptyset``. Only a
    whole answer is read: ``x = 2, no other solution`` or ``not the empty set`` are left alone."""
    if len(text) > 120:
        return None
    s = _unwrap_text(text)
    if s in _EMPTY_SYMBOLS or _EMPTY_SET_RE.fullmatch(s):
        return "\\emptyset"
    return None


def gold_in_words(gold: str) -> str:
    """``gold`` with a set it states in words written as the set (:func:`empty_set_in_words`,
    :func:`interval_in_words`): the lenient reading turns such an *answer* into the set, so a gold
    written the same way must be read the same way or the two would never match."""
    s = _unwrap_text(gold)
    if not re.search(r"[A-Za-z]{3}", re.sub(r"\\[A-Za-z]+", "", s)):
        return empty_set_in_words(s) or gold  # no word: only the empty-set symbols are read
    return empty_set_in_words(s) or interval_in_words(s) or gold


def _unwrap_text(text: str) -> str:
    """``text`` without surrounding ``$``, a whole-answer ``\\text{…}`` and a final full stop."""
    s = text.strip().strip("$").strip()
    wrapped = re.fullmatch(r"\\(?:text|textbf|textrm|mathrm|mbox)\{([^{}]*)\}", s)
    if wrapped:
        s = wrapped.group(1)
    return " ".join(s.split()).rstrip(".").strip()


def _one_sided(kind: str, bound: str) -> str | None:
    if not _is_bound(bound):
        return None
    a = bound.strip()
    return {">": f"({a}, \\infty)", ">=": f"[{a}, \\infty)", "<": f"(-\\infty, {a})", "<=": f"(-\\infty, {a}]",
            "!=": f"(-\\infty, {a}) \\cup ({a}, \\infty)"}[kind]


def _unwrap(value: str) -> str:
    """A bound as written in a phrase: without ``$``, trailing punctuation and a ``x =`` before it."""
    return re.sub(rf"^{_VAR}\s*=\s*", "", value.strip().strip("$").strip().rstrip(".,;").strip())


def _is_bound(value: str) -> bool:
    """A value: a digit or a LaTeX command in it, and no letters outside LaTeX commands."""
    s = value.strip()
    bare = re.sub(r"\\[A-Za-z]+", "", s)
    return bool(s) and re.search(r"[A-Za-z]", bare) is None and (any(c.isdigit() for c in s) or "\\" in s)
