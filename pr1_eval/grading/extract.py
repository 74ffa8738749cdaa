"""Find the model's final answer in a response, never inside a ``<Path>``.

Parallel-R1 responses end with a line ``Final Answer: …``; older or off-format responses may
only give ``\\boxed{…}``. Paths are exploratory drafts, so an answer written inside one (closed
or cut off) is not the model's answer: every search runs on :func:`outside_paths` text.

Everything here is linear in the response length (no nested regex quantifiers, bounded brace
scans), so a multi-megabyte response cannot hang the scorer or the RL reward.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pr1_eval.grading.answer_text import (
    RULES,
    Reading,
    balanced_boxes,
    box_chain,
    marker_matches,
    read_answer,
    read_boxes,
    values,
)
from pr1_eval.grading.negation import NEGATED_RULE
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.parse import outside_paths

__all__ = ["RULES", "ExtractedAnswer", "END_OF_TURN_TEXTS", "clean_answer", "cut_at_turn_end", "extract_answer",
           "last_boxed"]

#: ``Final Answer`` then optional markdown emphasis, then the colon (case-insensitive).
_FINAL_RE = re.compile(r"final answer[ \t*_]*:", re.IGNORECASE)
_TAG_RE = re.compile("|".join(re.escape(tag) for tag in T.ALL_TAGS))
#: Longest display-math answer we follow past the end of the ``Final Answer:`` line.
_MAX_DISPLAY_SCAN = 20_000
#: Most lines an answer that leaves math open on its first line may continue over.
_MAX_CONTINUED_LINES = 40
_DOLLAR_RE = re.compile(r"(?<!\\)\$")
#: A line that is one equation of a named unknown and nothing else (``$x = 1$``, ``y = 2,``): a
#: system's solution written one equation a line continues over such lines.
_EQUATION_LINE_RE = re.compile(r"\$?\s*[A-Za-z](?:_\{?[A-Za-z0-9]{1,4}\}?)?\s*=\s*[^=$\n]{1,200}?\s*\$?\s*[,;]?\s*")
#: How a math answer on the next line starts, after a lead-in without a value (``The matrix is``).
_MATH_START = ("$", "\\[", "\\(", "\\begin{")
_FORMULA_GOES_ON = ("$", "=", "+", "-", ",", "\\\\", "(", "[", "{", "\\cdot", "\\times")
#: Longest answer line we keep; anything longer is degenerate output, cut so cleaning stays cheap.
_MAX_ANSWER_CHARS = 10_000
#: How many ``Final Answer:`` markers (from the end) may be empty before we give up on them.
_MAX_FINAL_TRIES = 64
#: Texts that end a model's turn in the chat templates of the common model families (Qwen's
#: ``<|im_end|>``/``<|endoftext|>``, Llama's, DeepSeek's, SentencePiece's ``</s>``), and the start
#: of a new turn. Nothing after one of them is the model's answer.
END_OF_TURN_TEXTS: tuple[str, ...] = (
    "<|im_end|>", "<|endoftext|>", "<|im_start|>", "<|eot_id|>", "<|end_of_text|>", "<|end|>",
    "<\uff5cend\u2581of\u2581sentence\uff5c>", "</s>",
)


@dataclass(frozen=True)
class ExtractedAnswer:
    """The answer text (``None`` when there is none) and where it came from:
    ``'final_answer'``, ``'boxed'`` or ``'none'`` (the values of ``SampleRecord.answer_source``).

    ``rule`` says how the text was read (one of :data:`RULES`, see
    :mod:`pr1_eval.grading.answer_text`); it is detail, not identity, so it takes no part in ``==``.
    """

    text: str | None
    source: str
    rule: str = field(default="none", compare=False)


def extract_answer(response: str, end_texts: tuple[str, ...] = (), *, strict: bool = False) -> ExtractedAnswer:
    """The answer of ``response``: the last non-empty ``Final Answer:`` line outside every path,
    else the last ``\\boxed{…}`` outside every path (with the boxes joined to it, see
    :func:`~pr1_eval.grading.answer_text.box_chain`), else none. The response ends at the first
    end-of-turn text (:data:`END_OF_TURN_TEXTS` plus ``end_texts``, e.g. a tokenizer's EOS text).

    Never raises: an internal failure reads as no answer, since a scorer must survive any model
    output. ``strict=True`` lets it raise instead (the fuzz tests use it to see every failure).
    """
    try:
        return _extract(response, tuple(end_texts))
    except Exception:  # noqa: BLE001 - a scorer must survive any model output
        if strict:
            raise
        return ExtractedAnswer(None, "none", "none")


def answer_region(response: str, end_texts: tuple[str, ...]) -> str:
    """The text an answer may come from, under every answer policy: the response up to the end of
    its turn, with the paths' text removed (an answer is never read from inside a ``<Path>``)."""
    text = response if isinstance(response, str) else ("" if response is None else str(response))
    text = cut_at_turn_end(text, end_texts)
    return outside_paths(text) if T.PATH_OPEN in text else text


def _extract(response: str, end_texts: tuple[str, ...]) -> ExtractedAnswer:
    """:func:`extract_answer` without its safety net."""
    text = answer_region(response, end_texts)
    answer = _final_answer(text)
    if answer.text is not None:
        return ExtractedAnswer(answer.text, "final_answer", answer.rule)
    if answer.rule == NEGATED_RULE:  # the last answer line rejects a value: no answer (grading.negation)
        return ExtractedAnswer(None, "none", NEGATED_RULE)
    boxed = read_boxes(box_chain(text))
    if boxed.text is not None:
        return ExtractedAnswer(boxed.text, "boxed", boxed.rule)
    return ExtractedAnswer(None, "none", "none")


def cut_at_turn_end(text: str, end_texts: tuple[str, ...] = ()) -> str:
    """``text`` up to the first end-of-turn text that follows some content; end-of-turn texts
    before any content are dropped. Linear in the length of ``text``."""
    markers = [m for m in (*END_OF_TURN_TEXTS, *end_texts) if m]
    if not any(m in text for m in markers):
        return text
    lead, n = 0, len(text)
    while True:  # skip leading whitespace and markers
        while lead < n and text[lead].isspace():
            lead += 1
        marker = next((m for m in markers if text.startswith(m, lead)), None)
        if marker is None:
            break
        lead += len(marker)
    ends = [pos for pos in (text.find(m, lead) for m in markers) if pos >= 0]
    return text[lead : min(ends, default=n)]


def _final_answer(text: str) -> Reading:
    """The reading of the last ``Final Answer:`` whose content is not empty.

    As in the paper's regex (``Final Answer\\s*:\\s*([^\\n]+)``) the answer may start on a later
    line; it ends at the line's end or at a tag; display math opened on that line (``$$``,
    ``\\[``, also after a lead-in: ``Answer \\[``) is followed to its closing delimiter, and math
    the line leaves open (a ``$``, ``\\(``, ``\\left(``, ``\\begin{pmatrix}`` or ``{`` not closed on
    it) is followed over the next lines until it closes. A line that states no value but leads in
    to math on the next line (``The matrix is`` / ``$$\\begin{pmatrix}…$$``) is read with that line;
    a line that is one equation (``$x = 1$``) is read with the equation lines that follow it, the
    solution of a system written one equation a line.
    """
    ends = [m.end() for m in marker_matches(_FINAL_RE, text, "final answer")]
    for end in reversed(ends[-_MAX_FINAL_TRIES:]):
        reading = read_answer(_answer_after(text, end))
        if reading.text is not None or reading.rule == NEGATED_RULE:
            return reading
    return Reading(None, "none")


def _answer_after(text: str, start: int) -> str:
    """The answer text after a ``Final Answer:`` colon at ``start``."""
    n = len(text)
    i = start
    while i < n and text[i].isspace():
        i += 1
    line_end = text.find("\n", i)
    line_end = n if line_end < 0 else line_end
    tag = _TAG_RE.search(text, i, line_end)  # e.g. "Final Answer: 6</Summary>"
    line = text[i : min(tag.start() if tag else line_end, i + _MAX_ANSWER_CHARS)]
    display = _display_from(text, i, line)
    if display is not None:
        return display
    if tag or line_end >= n:
        return line
    if _left_open(line):
        return _continued(text, i, line_end) or line
    return _lead_in(text, line, line_end) or _equation_lines(text, line, line_end) or line


def _display_from(text: str, i: int, line: str) -> str | None:
    """The answer through the closing delimiter of display math (``$$``, ``\\[``) that ``line``
    (at ``i`` in ``text``) opens and leaves open: at its start, or after a lead-in (``Answer \\[``)."""
    for opener, closer in (("$$", "$$"), ("\\[", "\\]")):
        at = line.find(opener) if opener != "$$" or line.count("$$") % 2 == 1 else -1
        if at >= 0 and closer not in line[at + len(opener) :] and (at == 0 or not line[:at].strip()
                                                                      or not _has_value(line[:at])):
            start = i + at + len(opener)
            close = text.find(closer, start, start + _MAX_DISPLAY_SCAN)
            if close >= 0:
                return " ".join(text[i : close + len(closer)].split("\n"))
    return None


def _has_value(text: str) -> bool:
    return any(True for _ in values(text))


def _lead_in(text: str, line: str, line_end: int) -> str | None:
    """``line`` and the next line, when ``line`` states no value and the next line starts with
    math (``The solutions are:`` / ``\\[x = 1, x = 2\\]``); the next line's display or open math
    is followed as on a first line."""
    if not line.strip() or _has_value(line):
        return None
    j = line_end + 1
    nxt = text.find("\n", j)
    nxt = len(text) if nxt < 0 else nxt
    following = text[j:nxt].strip()
    if not following.startswith(_MATH_START):
        return None
    start = j + (len(text[j:nxt]) - len(text[j:nxt].lstrip()))
    rest = _answer_after(text, start) if _TAG_RE.search(text, j, nxt) is None else following
    return f"{line.strip()} {rest}"


def _equation_lines(text: str, line: str, line_end: int) -> str | None:
    """``line`` and the lines after it, each one equation of a named unknown (``$x = 1$`` /
    ``$y = 2$``, a trailing comma allowed), joined with commas; ``None`` unless ``line`` is such an
    equation and at least the next line is one."""
    if not _EQUATION_LINE_RE.fullmatch(line.strip()):
        return None
    lines, end = [line.strip().rstrip(",;").strip()], line_end
    for _ in range(_MAX_CONTINUED_LINES):
        nxt = text.find("\n", end + 1)
        nxt = len(text) if nxt < 0 else nxt
        candidate = text[end + 1 : nxt].strip()
        if not _EQUATION_LINE_RE.fullmatch(candidate) or _TAG_RE.search(candidate):
            break
        lines.append(candidate.rstrip(",;").strip())
        end = nxt
        if nxt >= len(text):
            break
    return ", ".join(lines) if len(lines) > 1 else None


def _left_open(line: str) -> bool:
    """Whether ``line`` leaves math open: more ``\\(`` than ``\\)``, a ``\\begin{…}`` without its
    ``\\end``, more ``{`` than ``}``, or an odd number of ``$`` when the line ends in the middle of
    a formula (on ``$`` itself, an operator, a comma, ``\\\\`` or an opening bracket) — a ``$5``
    that simply lacks its closing ``$`` is an answer, not the start of a display."""
    stripped = line.rstrip()
    return (
        line.count("\\(") > line.count("\\)")
        or line.count("\\left") > line.count("\\right")
        or line.count("\\begin{") > line.count("\\end{")
        or line.count("{") - line.count("\\{") > line.count("}") - line.count("\\}")
        or (len(_DOLLAR_RE.findall(line)) % 2 == 1 and stripped.endswith(_FORMULA_GOES_ON))
    )


def _continued(text: str, start: int, line_end: int) -> str | None:
    """The answer from ``start`` through the later lines until the math the first line opened is
    closed (``$\\begin{pmatrix}`` … ``\\end{pmatrix}$`` over several lines); ``None`` when it does
    not close within ``_MAX_CONTINUED_LINES`` lines, ``_MAX_DISPLAY_SCAN`` characters, before a tag
    or before a blank line. The lines are joined with spaces."""
    stop = min(len(text), start + _MAX_DISPLAY_SCAN)
    tag = _TAG_RE.search(text, line_end, stop)
    stop = tag.start() if tag else stop
    end = line_end
    for _ in range(_MAX_CONTINUED_LINES):
        if end >= stop:
            return None
        nxt = text.find("\n", end + 1, stop)
        end = stop if nxt < 0 else nxt
        if not text[text.rfind("\n", 0, end) + 1 : end].strip():
            return None  # a blank line: math mode never holds one, the answer did not continue
        candidate = text[start:end]
        if not _left_open(candidate):  # one line again: math-verify reads no newline inside $…$
            return " ".join(candidate.split("\n"))
    return None


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{…}`` (or ``\\fbox{…}``) with balanced braces, else ``None``.

    An opening cut off before its closing brace is skipped in favour of an earlier, complete
    one. Bounded work (see :func:`~pr1_eval.grading.answer_text.balanced_boxes`).
    """
    boxes = balanced_boxes(text)
    if not boxes:
        return None
    _, open_brace, close = boxes[0]
    return text[open_brace + 1 : close]


def clean_answer(raw: str) -> str | None:
    """The answer text :func:`~pr1_eval.grading.answer_text.read_answer` reads from ``raw``."""
    return read_answer(raw).text
