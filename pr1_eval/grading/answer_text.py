"""Read the answer out of the text a response states as its answer (a ``Final Answer:`` line or
a ``\\boxed{}``), keeping the mathematics and dropping what math-verify would misread.

Why: the answer line is handed to math-verify wrapped in ``$…$`` (so bare LaTeX parses as LaTeX),
and inside math every word becomes a product of symbols: ``5 (since x is odd)`` reads as
``5·s·i·n·c·e·…``, and ``The largest $n$ is 34.`` gives ``n``. Each rule below removes one
such misreading; each is recorded (:data:`RULES`) so a run can report how often it fired.

Rules, tried in this order on one answer line:

- ``boxed`` / ``boxed_set``: boxes on the line win; several boxes joined only by connectives
  (``,``, ``and``, ``or``, spacing, ``\\text{…}``, ``x =``) are the set they state, read as
  ``a, b`` (math-verify reads ``\\boxed{a} and \\boxed{b}`` the same way);
- ``trailing_prose``: an explanation after a value is cut — *since, because, when, where, if,
  given, …*, or after a comma, parenthesis or ``\\quad`` also *as, for, with, which, using, not,
  but* (``10 which is 1,000.99`` restates, it does not explain; ``5, not 6`` answers 5);
- ``math_spans``: several values joined only by connectives (``$3$ and $5$``,
  ``$x=3$ or $x=4$``, ``3 or 4``) are one answer, ``3, 5``;
- ``sentence``: a line of prose yields the value it states: in its first sentence that has a
  value (when that one has no copula, a later one that opens with *so, thus, therefore, donc, …*
  comes first: it concludes),
  what follows the last *is/are/equals/be/:* (``The largest $n$ is 34.`` → ``34``), else
  the last value of the sentence; a negation there (``It is not 5.``, ``no es 5``) states no
  value: a sentence that only rejects one is passed over, a line of nothing else has no answer
  (``negated``, :mod:`pr1_eval.grading.negation`), any other is read whole. Sentences in other languages read the same way: accented
  Latin words and words of other scripts (Cyrillic, CJK, …; not Greek, which is math) are prose,
  a few short function words and copulas of Spanish, French, Italian, Portuguese and German are
  known (``La respuesta es 5`` → ``5``, ``答案是5。`` → ``5``), and single letters before a number
  in a prose value are words (``Il y a 12 pommes`` → ``12``);
- ``line``: otherwise the whole line, as before (delimiters, ``\\text{}`` and trailing
  punctuation stripped).

Whatever rule read it, a value that is a one-unknown inequality is handed over as its interval,
and so is a prose line that states an interval in words (:mod:`pr1_eval.grading.intervals`); a
system written as a ``cases``/``aligned`` environment of equations as the list of its equations
(``x = 1, y = 2``); a compound unit after a number (``5 m/s``, ``10 ft^2``) and the scale letter
after a degree sign (``45^\\circ C``) are cut, as math-verify already drops simple units.

A *value* is a math span or a run of plain text with a digit or a LaTeX command in it; prose
words (three letters or more, or a short English function word, but never a math name such as
``sqrt`` or ``pi``) separate runs. Everything is linear in the line length: math spans are
bounded (``_MAX_SPAN``) and there are no nested quantifiers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from pr1_eval.grading.intervals import interval_in_words, interval_of_inequality
from pr1_eval.grading.negation import NEGATED_RULE, rejects_one_value

#: Every rule :func:`read_answer` may report (see the module docstring), plus ``'none'``.
RULES: tuple[str, ...] = ("line", "boxed", "boxed_set", "trailing_prose", "math_spans", "sentence", NEGATED_RULE,
                          "none")

_MAX_SPAN = 4000
_MAX_BOX_SCAN = 20_000
_MAX_BOXES = 64
_TRAILING_JUNK = " \t\r\n.,;。，；．"
_RUN_JUNK = " \t\r\n.,;:!?\"'`“”‘’。，；：．！？"
_BOX_OPEN_RE = re.compile(r"\\(?:boxed|fbox) ?\{")
#: A bare number (ASCII digits, an optional minus and decimals): every rule of :func:`read_answer`
#: leaves it as it is (no box, word, math span, cut or trailing junk to remove), so it reads
#: as itself by the ``line`` rule without running them; most answer lines are one.
_BARE_NUMBER_RE = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_MATH_SPAN_RE = re.compile(
    rf"(?<!\\)\$\$(?P<dd>[^$]{{1,{_MAX_SPAN}}}?)(?<!\\)\$\$"
    rf"|\\\[(?P<br>.{{1,{_MAX_SPAN}}}?)\\\]"
    rf"|\\\((?P<pa>.{{1,{_MAX_SPAN}}}?)\\\)"
    rf"|(?<!\\)\$(?P<d>[^$]{{1,{_MAX_SPAN}}}?)(?<!\\)\$",
    re.DOTALL,
)
_MATH_DELIMS: tuple[tuple[str, str], ...] = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
_TEXT_WRAP_RE = re.compile(r"^\\(?:text|textbf|textrm|mathrm|mbox)\{([^{}]*)\}$")
#: Words: not LaTeX commands (no backslash before them) and not glued to a digit (``10cm``,
#: ``x2`` and identifiers such as ``PR1EVAL`` are tokens of a formula, not prose).
_LATIN = "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f"
#: Letters of scripts that never name a variable (Cyrillic, Hebrew, Arabic, Indic, Thai, kana, CJK,
#: Hangul): a run of them is a word even when glued to a digit (``答案是5``). Greek is math.
_OTHER_SCRIPTS = "\u0400-\u04ff\u0590-\u06ff\u0900-\u0e7f\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af"
_WORD_RE = re.compile(
    rf"(?<![\\0-9{_LATIN}])[{_LATIN}][{_LATIN}'’]*+(?![0-9])|[{_OTHER_SCRIPTS}]+"
)
#: Math names written without a backslash; never prose.
_MATH_WORDS = frozenset({
    "sqrt", "sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "log",
    "ln", "lg", "exp", "lim", "max", "min", "gcd", "lcm", "mod", "pi", "inf", "infty", "infinity", "det", "frac",
    "dfrac", "tfrac", "cdot", "times", "div", "pm", "mp", "leq", "geq", "neq", "approx", "circ", "deg",
})
#: Short English words that make a line prose although shorter than three letters.
_SHORT_PROSE = frozenset({
    "is", "of", "to", "in", "on", "at", "by", "as", "be", "we", "it", "so", "if", "an", "am",
    # the same in answer lines written in Spanish, French, Italian, Portuguese, German
    "es", "la", "el", "le", "il", "un", "de", "du", "et", "en", "se", "da", "di", "em",
})
_CONNECTIVES = frozenset({"and", "or"})
_NEGATIONS = frozenset({
    "not", "no", "never", "cannot", "isn't", "aren't", "isn’t", "aren’t", "none", "neither", "nor",
    "non", "nicht", "pas", "não", "не", "不",
})
_COPULAS = frozenset({
    "is", "are", "was", "were", "be", "equals", "equal", "gives", "becomes",
    "es", "est", "ist", "é", "è", "sind", "son", "sont", "são", "sono", "равен", "равна", "равно", "это", "是", "为", "為",
})
#: An explanation after the answer: separators, then a word that starts a reason or condition.
_CUT_RE = re.compile(
    r"(?:\s|,|;|\(|\\q?quad\b|\\[,;:! ]|~|—|–)+(?:\\text(?:rm|bf)?\{\s*)?\(?\s*"
    r"(?:since|because|when|whenever|where|if|given|assuming|provided|i\.e\.|e\.g\.)\b"
    r"|(?:\s*(?:,|;|\(|\\q?quad\b|—|–))+\s*(?:\\text(?:rm|bf)?\{\s*)?\(?\s*(?:as|for|with|which|using|not|but)\b",
    re.IGNORECASE,
)
_SPACING_RE = re.compile(r"\\q?quad\b|\\[,;:! ]|~|\\(?:left|right)\b|\s+")
_TEXT_GROUP_RE = re.compile(r"\\(?:text|textrm|textbf|mbox|mathrm)\s*\{([^{}]{0,60})\}")
_COMMAND_ARG_RE = re.compile(r"\\[A-Za-z]+\*?\s*\{([^{}]{0,60})\}")
_VAR_EQUALS_RE = re.compile(r"(?:[A-Za-z](?:_\{?[A-Za-z0-9]{1,4}\}?)?\s*=\s*)$")
_COMMAND_RE = re.compile(r"\\[A-Za-z]")
#: Single letters before a number in a prose value: words of the sentence (``Il y a 12``), since
#: space-separated letters before a number are not how a formula is written.
_LEADING_LETTERS_RE = re.compile(r"^(?:[A-Za-z]\s+)+(?=[-+]?[0-9])")
_SENTENCE_END_RE = re.compile(r"[.!?]\s+(?=[A-Z\\$(])")
#: Words that open a concluding sentence: such a sentence, later in the line, states the answer
#: (``353 g - 79 g = 274 g. Donc, il a déjà 79 g`` → ``79``).
_CONCLUSION_RE = re.compile(
    r"\s*(?:so|thus|therefore|hence|donc|ainsi|also|daher|somit|entonces|así|quindi|dunque|portanto|logo|"
    r"因此|所以|故)\b", re.IGNORECASE)
#: A system written as an environment whose rows are equations: read as the list of its rows.
_SYSTEM_RE = re.compile(
    r"\\begin\{(cases|aligned|align\*?|gathered|gather\*?|split|array)\}(?:\{[^{}]{0,20}\})?(.{1,4000}?)\\end\{\1\}",
    re.DOTALL)
#: A compound unit after a number (``5 m/s``, ``100 km/h``, ``10 ft^2``): math-verify keeps it as
#: a product of symbols, so it is cut. Simple units (``cm``, ``miles``) math-verify drops itself.
_COMPOUND_UNIT_RE = re.compile(
    r"(?<=[0-9}])\s*(?:\\(?:text|mathrm|mbox|textnormal)\{\s*)?"
    r"(?:(?:km|cm|mm|m|kg|g|mi|ft|yd|in|L|mL|ml)(?:\s*/\s*(?:s|h|hr|min|sec)|\^\{?[23]\}?|²|³)|mph|kph)"
    r"\s*\}?$")
#: A temperature scale after a degree sign (``45^\\circ C``, ``30°F``): the degrees are the value.
_DEGREE_SCALE_RE = re.compile(r"(\^\s*\{?\\circ\s*\}?|°)\s*(?:\\(?:text|mathrm)\{\s*)?[CF]\s*\}?$")


@dataclass(frozen=True)
class Reading:
    """An answer read from a line: its text (``None`` when nothing is left) and the rule used."""

    text: str | None
    rule: str


def marker_matches(pattern: re.Pattern[str], text: str, word: str) -> Iterator[re.Match[str]]:
    """What ``pattern.finditer(text)`` yields, found faster: ``pattern`` is case-insensitive, each of
    its matches starts with ``word`` (lower-case ASCII) and holds no later start of ``word``, such as
    ``final answer[ \\t*_]*:``. In ASCII text such a regex folds only ASCII letters, so every match
    starts where ``text.lower()`` holds ``word``: only those places are tried (``str.find``, in C),
    each after the last match's end as ``finditer`` goes, instead of running the regex over the
    whole text (about four times faster on a path of a few hundred words). Other text uses
    ``finditer``: Unicode case folding matches ``ſ`` for ``s`` and ``K`` for ``k``, which ``lower()``
    does not map."""
    if not text.isascii():
        yield from pattern.finditer(text)
        return
    lower = text.lower()
    at = lower.find(word)
    while at >= 0:
        match = pattern.match(text, at)
        if match is not None:
            yield match
        at = lower.find(word, match.end() if match is not None else at + 1)


# ----- braces and boxes ----------------------------------------------------------------------------
def matching_brace(text: str, open_brace: int) -> int | None:
    """Offset of the ``}`` closing the ``{`` at ``open_brace`` (escaped braces ignored), scanning
    at most ``_MAX_BOX_SCAN`` characters."""
    depth = 0
    i = open_brace
    stop = min(len(text), open_brace + _MAX_BOX_SCAN)
    while i < stop:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def balanced_boxes(text: str) -> list[tuple[int, int, int]]:
    """``(start, open_brace, close_brace)`` of the balanced ``\\boxed{…}``/``\\fbox{…}`` in
    ``text``, last ones first, at most ``_MAX_BOXES`` openings tried; boxes nested in a later
    box are skipped."""
    found: list[tuple[int, int, int]] = []
    end = len(text)
    for _ in range(_MAX_BOXES):
        start = _last_box_open(text, end)
        if start is None:
            break
        open_brace = text.index("{", start)
        close = matching_brace(text, open_brace)
        if close is not None and (not found or close < found[-1][0]):
            found.append((start, open_brace, close))
        end = start
    return found


def _last_box_open(text: str, end: int) -> int | None:
    """Offset of the last ``\\boxed{``/``\\fbox{`` that starts before ``end``."""
    best = None
    for name in ("\\boxed", "\\fbox"):
        pos = text.rfind(name, 0, end)
        while pos >= 0 and not _BOX_OPEN_RE.match(text, pos):
            pos = text.rfind(name, 0, pos)
        if pos >= 0 and (best is None or pos > best):
            best = pos
    return best


def box_chain(text: str) -> list[str]:
    """Contents of the last balanced box and of the boxes before it that it is joined to by
    connectives only (see :func:`is_connective_gap`), in text order; empty without a box."""
    boxes = balanced_boxes(text)
    if not boxes:
        return []
    chain = [boxes[0]]
    for box in boxes[1:]:
        if not is_connective_gap(text[box[2] + 1 : chain[-1][0]], allow_text=True):
            break
        chain.append(box)
    return [text[open_brace + 1 : close] for _, open_brace, close in reversed(chain)]


def is_connective_gap(gap: str, allow_text: bool = False) -> bool:
    """Whether ``gap`` (text between two answers) only joins them: spacing, math delimiters,
    ``,``/``;``/``and``/``or``, a ``x =`` before the next answer, and with ``allow_text`` any
    short ``\\text{…}`` (math-verify joins every box of one math environment)."""
    if len(gap) > 200:
        return False
    text_group = (lambda m: " ") if allow_text else (lambda m: f" {m.group(1)} ")
    s = _TEXT_GROUP_RE.sub(text_group, gap)
    for delim in ("$", "\\[", "\\]", "\\(", "\\)"):
        s = s.replace(delim, " ")
    s = _VAR_EQUALS_RE.sub("", s.strip())
    s = _SPACING_RE.sub("", s).lower()
    return s in {"", ",", ";", "and", "or", ",and", ",or", "&"}


# ----- reading a line --------------------------------------------------------------------------------
def read_answer(raw: str) -> Reading:
    """The answer stated by ``raw`` (the text after ``Final Answer:``, or a box's content) and the
    rule that found it; ``Reading(None, 'none')`` when nothing is left."""
    s = raw.strip().strip("*_").strip()
    if _BARE_NUMBER_RE.fullmatch(s):
        return Reading(s, "line")
    if "\\boxed" in s or "\\fbox" in s:
        boxed = read_boxes(box_chain(s))
        if boxed.text is not None:
            return boxed
    cut = cut_trailing_prose(s)
    rule = "trailing_prose" if cut != s else "line"
    found = list(values(cut))
    if _is_prose(cut):
        interval = interval_in_words(cut) or interval_in_words(_after_last_copula(cut))
        if interval is not None:  # "all real numbers greater than 2": the interval (grading.intervals)
            return Reading(interval, "sentence")
        stated = _read_prose(cut)
        if stated is None:
            return Reading(None, NEGATED_RULE)
        if stated:
            return _joined(stated, "sentence")
    elif len(found) > 1 and all(connected for _, connected in found[1:]):
        return _joined([v for v, _ in found], "math_spans")
    text = clean_value(_last_math_segment(cut))
    return Reading(text, rule) if text else Reading(None, "none")


def read_boxes(contents: list[str]) -> Reading:
    """The answer stated by a chain of box contents (see :func:`box_chain`): each cleaned, as is."""
    return _joined(contents, "boxed_set" if len(contents) > 1 else "boxed")


def _joined(parts: list[str], rule: str) -> Reading:
    """``parts`` cleaned and joined as one answer (``a, b``)."""
    cleaned = [c for c in (clean_value(p) for p in parts) if c]
    return Reading(", ".join(cleaned), rule) if cleaned else Reading(None, "none")


def clean_value(raw: str) -> str | None:
    """``raw`` without math delimiters, a whole-answer ``\\text{}``, markdown emphasis and trailing
    punctuation; ``None`` when nothing is left."""
    s = raw.strip().strip("*_").strip().rstrip(_TRAILING_JUNK)
    for _ in range(3):  # nested wrappers such as $\text{(A)}$ or \text{$5$}
        before = s
        s = _strip_delims(s).strip()
        wrapped = _TEXT_WRAP_RE.match(s)
        if wrapped:
            s = wrapped.group(1).strip()
        s = s.rstrip(_TRAILING_JUNK)
        if s == before:
            break
    bare = _DEGREE_SCALE_RE.sub(r"\1", _COMPOUND_UNIT_RE.sub("", s)).strip()
    if bare != s and not re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+|^[A-Za-z]\s*=", "", bare)):  # number, unit
        s = bare
    return (_system_as_list(s) or interval_of_inequality(s) or s) or None


def _system_as_list(s: str) -> str | None:
    """A ``cases``/``aligned``/… environment whose every row is an equation, as the list of its
    rows (``x = 1, y = 2``), which is how math-verify reads a system's solution; else ``None``."""
    match = _SYSTEM_RE.fullmatch(s)
    if match is None:
        return None
    rows = [" ".join(row.replace("&", " ").split()) for row in match.group(2).split("\\\\")]
    rows = [row.rstrip(",;.") for row in rows if row]
    if len(rows) < 2 or not all(row.count("=") == 1 for row in rows):
        return None
    return ", ".join(rows)


def _strip_delims(s: str) -> str:
    """``s`` without one pair of surrounding math delimiters, if it has them."""
    for opener, closer in _MATH_DELIMS:
        if len(s) >= len(opener) + len(closer) and s.startswith(opener) and s.endswith(closer):
            return s[len(opener) : len(s) - len(closer)]
    return s


def _last_math_segment(s: str) -> str:
    """When a line mixes other text and several math spans, the last span; else the line."""
    spans = list(_MATH_SPAN_RE.finditer(s))
    if not spans:
        return s
    last = spans[-1]
    if len(spans) == 1 and last.start() == 0 and not s[last.end() :].strip(_TRAILING_JUNK):
        return s
    return last.group(0)


def cut_trailing_prose(s: str) -> str:
    """``s`` up to an explanation that follows a value (``5, since x = 5`` → ``5``); a math span
    left open by the cut is closed again."""
    for match in _CUT_RE.finditer(s):
        head = s[: match.start()]
        if any(True for _ in values(head)):
            return _close_open_math(head)
    return s


def _close_open_math(s: str) -> str:
    """``s`` with a math span the cut left open closed again (``$5`` → ``$5$``)."""
    if len(re.findall(r"(?<!\\)\$", s)) % 2:
        s += "$"
    if s.count("\\(") > s.count("\\)"):
        s += "\\)"
    if s.count("\\[") > s.count("\\]"):
        s += "\\]"
    return s


# ----- prose --------------------------------------------------------------------------------------
def _segments(text: str) -> Iterator[tuple[str, str, int, int]]:
    """``(kind, text, start, end)`` pieces of ``text``: ``'math'`` span contents (``start``/``end``
    include the delimiters) and ``'plain'`` text."""
    pos = 0
    for match in _MATH_SPAN_RE.finditer(text):
        if match.start() > pos:
            yield "plain", text[pos : match.start()], pos, match.start()
        yield "math", next(g for g in match.groups() if g is not None), match.start(), match.end()
        pos = match.end()
    if pos < len(text):
        yield "plain", text[pos:], pos, len(text)


def _word_role(word: str) -> str:
    """``'connective'``, ``'prose'`` or ``'math'`` (part of a formula: ``x``, ``mx``, ``sqrt``)."""
    lower = word.lower()
    if not word.isascii():
        return "prose"  # accented Latin or another script: a word of some language, never a variable
    if lower in _CONNECTIVES:
        return "connective"
    if lower in _MATH_WORDS:
        return "math"
    if lower in _SHORT_PROSE or len(word) >= 3:
        return "prose"
    return "math"


def _plain_without_text_groups(plain: str) -> str:
    """``plain`` with the arguments of LaTeX commands blanked (``\\text{cm}``, ``\\begin{pmatrix}``
    are units, labels and environments, not prose), except that a ``\\text{and}`` keeps its
    connective. Same length as ``plain``, so offsets carry over."""
    def blank(m: re.Match[str]) -> str:
        inner = (m.group(1) or "").strip().lower()
        if inner in _CONNECTIVES:
            return f" {inner}".ljust(len(m.group(0)))
        return " " * len(m.group(0))

    return _COMMAND_ARG_RE.sub(blank, plain)


def _is_prose(s: str) -> bool:
    """Whether ``s`` has a prose word outside its math spans and ``\\text{}`` groups."""
    for kind, piece, _, _ in _segments(s):
        if kind == "plain":
            words = _WORD_RE.findall(_plain_without_text_groups(piece))
            if any(_word_role(w) == "prose" for w in words):
                return True
    return False


def values(text: str) -> Iterator[tuple[str, bool]]:
    """The values in ``text`` (math spans, and plain runs with a digit or a LaTeX command), each
    with whether it is joined to the previous value: only connectives between them, or an
    ``and``/``or``/``but`` among words (``12 apples and 3 pears`` is a list, never just ``3``;
    a hedge, ``5 but maybe 6``, states both and so matches no single gold)."""
    gap, conjunction, seen = "", False, False
    for kind, piece, _, _ in _segments(text):
        if kind == "math":
            if piece.strip():
                yield piece, seen and (conjunction or is_connective_gap(gap))
                gap, conjunction, seen = "", False, True
            continue
        plain = _plain_without_text_groups(piece)
        pos = 0
        for word in _WORD_RE.finditer(plain):
            role = _word_role(word.group())
            if role == "math":
                continue
            run = _tidy_run(piece[pos : word.start()])
            if _is_value(run):
                yield run, seen and (conjunction or is_connective_gap(gap))
                gap, conjunction, seen = "", False, True
            else:
                gap += piece[pos : word.start()]
            conjunction = conjunction or role == "connective" or word.group().lower() == "but"
            gap += word.group() if role == "connective" else " ¶ "
            pos = word.end()
        run = _tidy_run(piece[pos:])
        if _is_value(run):
            yield run, seen and (conjunction or is_connective_gap(gap))
            gap, conjunction, seen = "", False, True
        else:
            gap += piece[pos:]


def last_value(text: str) -> str | None:
    """The last value :func:`values` yields for ``text`` (``None`` when it yields none), read
    from the end. Why: a closing sentence can hold hundreds of words and only its last value is
    wanted. Exact because, in text without a math span, :func:`values` splits one plain piece at
    its non-math words and yields each run between two of them that :func:`_is_value` accepts,
    whatever came before; so the last such run is the answer. Text with a math span is read in
    full."""
    if _MATH_SPAN_RE.search(text):
        last = None
        for value, _ in values(text):
            last = value
        return last
    end = len(text)
    for word in reversed(list(_WORD_RE.finditer(_plain_without_text_groups(text)))):
        if _word_role(word.group()) == "math":
            continue  # part of the run around it, as in values()
        run = _tidy_run(text[word.end() : end])
        if _is_value(run):
            return run
        end = word.start()
    run = _tidy_run(text[:end])
    return run if _is_value(run) else None


def _tidy_run(run: str) -> str:
    """A plain run without surrounding punctuation, a leading ``=``/``:`` and unbalanced brackets."""
    s = run.strip(_RUN_JUNK).lstrip("=:").strip(_RUN_JUNK)
    while s and s[-1] in "([{" or (s.endswith(")") and s.count("(") < s.count(")")):
        s = s[:-1].strip(_RUN_JUNK)
    while s and (s[0] in ")]}" or (s[0] == "(" and s.count("(") > s.count(")"))):
        s = s[1:].strip(_RUN_JUNK)
    return s


def _is_value(run: str) -> bool:
    """A plain run that states something: it has a digit or a LaTeX command."""
    return bool(run) and (any(ch.isdigit() for ch in run) or _COMMAND_RE.search(run) is not None)


def _read_prose(line: str) -> list[str] | None:
    """The value a prose line states: the first sentence with a value; in it, what follows the
    last copula (``is``, ``are``, ``equals``, ``:``…) if that holds a value, else the whole
    sentence; of those values, the last group joined by connectives. ``None``: every sentence
    with a value only rejects it (:mod:`pr1_eval.grading.negation`)."""
    rejected = False
    sentences = _sentences(line)
    first = next((x for x in sentences if any(True for _ in values(x))), "")
    # a later sentence that concludes comes first when the first valued one states nothing (no copula)
    concluding = [x for x in sentences[1:] if _CONCLUSION_RE.match(x)] if _after_last_copula(first) == first else []
    for sentence in [*reversed(concluding), *(x for x in sentences if x not in concluding)]:
        tail = _after_last_copula(sentence)
        found = list(values(tail)) or list(values(sentence))
        if found and (_negated(tail if list(values(tail)) else sentence) or _negated_copula(sentence)):
            if rejects_one_value(sentence, list(values(sentence))):
                rejected = True  # "it is not 5": no value is stated here
                continue
            return []
        if found:
            group: list[str] = []
            for value, connected in reversed(found):
                group.insert(0, _LEADING_LETTERS_RE.sub("", value))
                if not connected:
                    break
            return group
    return None if rejected else []


def _negated(text: str) -> bool:
    """Whether ``text`` has a negation outside its math spans."""
    return any(
        word.lower() in _NEGATIONS
        for kind, piece, _, _ in _segments(text)
        if kind == "plain"
        for word in _WORD_RE.findall(_plain_without_text_groups(piece))
    )


def _negated_copula(sentence: str) -> bool:
    """Whether the last copula of ``sentence`` follows a negation (``no es 5``, ``non è 5``)."""
    words = [
        word.lower()
        for kind, piece, _, _ in _segments(sentence)
        if kind == "plain"
        for word in _WORD_RE.findall(_plain_without_text_groups(piece))
    ]
    copulas = [i for i, word in enumerate(words) if word in _COPULAS]
    return bool(copulas) and copulas[-1] > 0 and words[copulas[-1] - 1] in _NEGATIONS


def _sentences(line: str) -> list[str]:
    """``line`` split at sentence ends outside math spans (a period, then a capital)."""
    masked = list(line)
    for kind, _, start, end in _segments(line):
        if kind == "math":
            for i in range(start, end):
                if masked[i] in ".!?":
                    masked[i] = "x"
    cuts = [m.end() for m in _SENTENCE_END_RE.finditer("".join(masked))]
    bounds = [0, *cuts, len(line)]
    return [line[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if line[a:b].strip()]


def _after_last_copula(sentence: str) -> str:
    """The text after the last copula or colon outside math spans (the sentence when none)."""
    cut = 0
    for kind, piece, offset, _ in _segments(sentence):
        if kind != "plain":
            continue
        plain = _plain_without_text_groups(piece)
        for word in _WORD_RE.finditer(plain):
            if word.group().lower() in _COPULAS:
                cut = offset + word.end()
        colon = max(plain.rfind(":"), plain.rfind("："))
        if colon >= 0 and offset + colon + 1 > cut:
            cut = offset + colon + 1
    return sentence[cut:]
