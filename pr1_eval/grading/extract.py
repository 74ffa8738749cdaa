"""Find the model's final answer in a response, never inside a ``<Path>``.

Parallel-R1 responses end with a line ``Final Answer: …``; older or off-format responses may
only give ``\\boxed{…}``. Paths are exploratory drafts, so an answer written inside one (closed
or cut off) is not the model's answer: every search runs on :func:`outside_paths` text.

Everything here is linear in the response length (no nested regex quantifiers, bounded brace
scans), so a multi-megabyte response cannot hang the scorer or the RL reward.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pr1_eval import tags as T
from pr1_eval.structure import outside_paths

#: ``Final Answer`` then optional markdown emphasis, then the colon (case-insensitive).
_FINAL_RE = re.compile(r"final answer[ \t*_]*:", re.IGNORECASE)
_TAG_RE = re.compile("|".join(re.escape(tag) for tag in T.ALL_TAGS))
_BOXED_RE = re.compile(r"\\(?:boxed|fbox) ?\{")
#: Longest ``\boxed{…}`` content we scan for its closing brace; real answers are far shorter.
_MAX_BOX_SCAN = 20_000
#: Longest answer line we keep; anything longer is degenerate output, cut so cleaning stays cheap.
_MAX_ANSWER_CHARS = 10_000
#: How many ``Final Answer:`` markers (from the end) may be empty before we give up on them.
_MAX_FINAL_TRIES = 64
#: How many ``\boxed{`` openings (from the end) to try before giving up on unbalanced ones.
_MAX_BOX_TRIES = 32
_TEXT_WRAP_RE = re.compile(r"^\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}$")
_TRAILING_JUNK = " \t\r\n.,;"
#: Inline or display math between unescaped dollars; lazy bodies keep the scan linear.
_INLINE_MATH_RE = re.compile(r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<!\\)\$(.+?)(?<!\\)\$", re.DOTALL)
_MATH_DELIMS: tuple[tuple[str, str], ...] = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))


@dataclass(frozen=True)
class ExtractedAnswer:
    """The answer text (``None`` when there is none) and where it came from:
    ``'final_answer'``, ``'boxed'`` or ``'none'`` (the values of ``SampleRecord.answer_source``)."""

    text: str | None
    source: str


def extract_answer(response: str) -> ExtractedAnswer:
    """The answer of ``response``: the last non-empty ``Final Answer:`` line outside every path,
    else the last balanced ``\\boxed{…}`` outside every path, else none. Never raises."""
    try:
        text = response if isinstance(response, str) else ("" if response is None else str(response))
        if T.PATH_OPEN in text:
            text = outside_paths(text)
        answer = _final_answer(text)
        if answer is not None:
            return ExtractedAnswer(answer, "final_answer")
        boxed = last_boxed(text)
        if boxed is not None:
            cleaned = clean_answer(boxed)
            if cleaned:
                return ExtractedAnswer(cleaned, "boxed")
    except Exception:  # noqa: BLE001 - a scorer must survive any model output
        pass
    return ExtractedAnswer(None, "none")


def _final_answer(text: str) -> str | None:
    """Cleaned content of the last ``Final Answer:`` whose content is not empty.

    As in the paper's regex (``Final Answer\\s*:\\s*([^\\n]+)``) the answer may start on a later
    line; it ends at the line's end or at a tag; display math opened on that line (``$$``,
    ``\\[``) is followed to its closing delimiter.
    """
    ends = [m.end() for m in _FINAL_RE.finditer(text)]
    for end in reversed(ends[-_MAX_FINAL_TRIES:]):
        answer = clean_answer(_answer_after(text, end))
        if answer:
            return answer
    return None


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
    stripped = line.strip()
    for opener, closer in (("$$", "$$"), ("\\[", "\\]")):
        if stripped.startswith(opener) and closer not in stripped[len(opener) :]:
            close = text.find(closer, i + len(opener), i + len(opener) + _MAX_BOX_SCAN)
            if close >= 0:
                return text[i : close + len(closer)]
    return line


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{…}`` (or ``\\fbox{…}``) with balanced braces, else ``None``.

    Scans from the end; an opening cut off before its closing brace is skipped in favour of an
    earlier, complete one. Bounded work: at most ``_MAX_BOX_TRIES`` openings of
    ``_MAX_BOX_SCAN`` characters each.
    """
    search_end = len(text)
    for _ in range(_MAX_BOX_TRIES):
        start = _last_box_open(text, search_end)
        if start is None:
            return None
        open_brace = text.index("{", start)
        close = _matching_brace(text, open_brace)
        if close is not None:
            return text[open_brace + 1 : close]
        search_end = start
    return None


def _last_box_open(text: str, end: int) -> int | None:
    """Offset of the last ``\\boxed{``/``\\fbox{`` that starts before ``end``."""
    best = None
    for name in ("\\boxed", "\\fbox"):
        pos = text.rfind(name, 0, end)
        while pos >= 0 and not _BOXED_RE.match(text, pos):
            pos = text.rfind(name, 0, pos)
        if pos >= 0 and (best is None or pos > best):
            best = pos
    return best


def _matching_brace(text: str, open_brace: int) -> int | None:
    """Offset of the ``}`` closing the ``{`` at ``open_brace`` (escaped braces ignored)."""
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


def clean_answer(raw: str) -> str | None:
    """Strip the wrappers models put around an answer, keeping the mathematics untouched.

    Removes markdown emphasis, a ``\\boxed{}`` (its content wins), math delimiters, a whole-answer
    ``\\text{}`` and trailing punctuation. Returns ``None`` when nothing is left.
    """
    s = raw.strip().strip("*_").strip()
    boxed = last_boxed(s) if "\\boxed" in s or "\\fbox" in s else None
    s = boxed if boxed is not None else _last_math_segment(s)
    s = s.strip().rstrip(_TRAILING_JUNK)
    for _ in range(3):  # nested wrappers such as $\text{(A)}$ or \text{$5$}
        before = s
        s = _strip_delims(s).strip()
        wrapped = _TEXT_WRAP_RE.match(s)
        if wrapped:
            s = wrapped.group(1).strip()
        s = s.rstrip(_TRAILING_JUNK)
        if s == before:
            break
    return s or None


def _strip_delims(s: str) -> str:
    """``s`` without one pair of surrounding math delimiters, if it has them."""
    for opener, closer in _MATH_DELIMS:
        if len(s) >= len(opener) + len(closer) and s.startswith(opener) and s.endswith(closer):
            return s[len(opener) : len(s) - len(closer)]
    return s


def _last_math_segment(s: str) -> str:
    """When a line mixes words and inline math ("The answer is $5$."), the last math segment
    (with its delimiters); a line that is one math span, or has none, is returned as is."""
    segments = list(_INLINE_MATH_RE.finditer(s))
    if not segments:
        return s
    last = segments[-1]
    if len(segments) == 1 and last.start() == 0 and not s[last.end() :].strip(_TRAILING_JUNK):
        return s
    return last.group(0)
