"""The Parallel-R1 paper's own checker, reproduced so our numbers can sit beside the paper's.

The paper scores with VERL's DAPO/Minerva string checker
(``verl/utils/reward_score/math_dapo.py``, Apache-2.0, itself adapted from EleutherAI's
lm-evaluation-harness ``hendrycks_math/utils.py``), with its answer pattern changed to
``(?i)Final Answer\\s*:\\s*([^\\n]+)`` in ``zhengkid/Parallel-R1`` (MIT,
``verl/utils/reward_score/math_dapo*.py``): keep the LAST 300 characters of the response, take the
last match of that pattern, normalise it and the gold with ``normalize_final_answer``, and
compare the two strings exactly. This is our own implementation of that procedure; the two
normalisation tables are data copied from it so the behaviour is identical.

Faithful on purpose, quirks included: answers written inside ``<Path>`` count, an answer more
than 300 characters before the end is missed, ``9/7`` does not equal ``\\frac{9}{7}``. The
paper's reward manager decodes with ``skip_special_tokens=True``, so the six tags (single
special tokens there) and the end-of-turn texts (``<|im_end|>``, ``<|endoftext|>``, … and the
tokenizer's EOS text when the caller passes it) are removed before the 300-character window is
cut, so ``Final Answer: 70<|im_end|>`` reads ``70`` as it did in the paper; see :func:`paper_correct`.
"""

from __future__ import annotations

import re

from pr1_eval.grading.extract import END_OF_TURN_TEXTS
from pr1_eval.protocol import tags as T

#: (before, after) literal replacements, in order (VERL ``SUBSTITUTIONS``).
SUBSTITUTIONS: tuple[tuple[str, str], ...] = (
    ("an ", ""),
    ("a ", ""),
    (".$", "$"),
    ("\\$", ""),
    (r"\ ", ""),
    (" ", ""),
    ("mbox", "text"),
    (",\\text{and}", ","),
    ("\\text{and}", ","),
    ("\\text{m}", "\\text{}"),
)

#: Literal substrings deleted, in order (VERL ``REMOVED_EXPRESSIONS``).
REMOVED_EXPRESSIONS: tuple[str, ...] = (
    "square",
    "ways",
    "integers",
    "dollars",
    "mph",
    "inches",
    "hours",
    "km",
    "units",
    "\\ldots",
    "sue",
    "points",
    "feet",
    "minutes",
    "digits",
    "cents",
    "degrees",
    "cm",
    "gm",
    "pounds",
    "meters",
    "meals",
    "edges",
    "students",
    "childrentickets",
    "multiples",
    "\\text{s}",
    "\\text{.}",
    "\\text{\ns}",
    "\\text{}^2",
    "\\text{}^3",
    "\\text{\n}",
    "\\text{}",
    r"\mathrm{th}",
    r"^\circ",
    r"^{\circ}",
    r"\;",
    r",\!",
    "{,}",
    '"',
    "\\dots",
)

#: The paper's answer pattern (``is_correct_minerva``'s ``answer_pattern``).
PAPER_ANSWER_RE = re.compile(r"(?i)Final Answer\s*:\s*([^\n]+)")
#: Characters of the response tail the paper looks at (``compute_score``: ``solution_str[-300:]``).
PAPER_WINDOW = 300
#: What the paper compares when no answer matched.
INVALID = "[INVALID]"

# (pattern, replacement) pairs applied with re.sub, in VERL's order. Each keeps only the group
# VERL's substitution keeps, so the matches and results are the same.
_REGEX_STEPS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r".*?\$(.*?)\$.*"), r"$\1$"),  # first $…$ span wins, the rest of the line goes
    (re.compile(r"\\text\{(.*?)\}"), r"\1"),
    (re.compile(r"\\textbf\{(.*?)\}"), r"\1"),
    (re.compile(r"\\overline\{(.*?)\}"), r"\1"),
    (re.compile(r"\\boxed\{(.*)\}"), r"\1"),
    (re.compile(r"frac([^{])(.)"), r"frac{\1}{\2}"),  # \fracab -> \frac{a}{b}
    (re.compile(r"sqrt([^{])"), r"sqrt{\1}"),  # \sqrta -> \sqrt{a}
)

_TAG_STRINGS: tuple[str, ...] = T.ALL_TAGS


def normalize_final_answer(final_answer: str) -> str:
    """VERL's ``normalize_final_answer``: keep the part after the last ``=``, apply the
    substitution and removal tables, unwrap ``$…$``, ``\\text{}``, ``\\textbf{}``,
    ``\\overline{}``, ``\\boxed{}``, expand ``\\fracab``/``\\sqrta`` shorthands, drop ``$``, and
    remove thousands separators from pure digit strings."""
    s = final_answer.split("=")[-1]
    for before, after in SUBSTITUTIONS:
        s = s.replace(before, after)
    for expr in REMOVED_EXPRESSIONS:
        s = s.replace(expr, "")
    for pattern, replacement in _REGEX_STEPS:
        s = pattern.sub(replacement, s)
    s = s.replace("$", "")
    if s.replace(",", "").isdigit():
        s = s.replace(",", "")
    return s.strip()


def paper_extract(response: str, strip_tags: bool = True, end_texts: tuple[str, ...] = ()) -> str | None:
    """The raw answer the paper's checker reads (``None`` when its regex finds none)."""
    text = _without_special(response, (*_TAG_STRINGS, *END_OF_TURN_TEXTS, *end_texts)) if strip_tags else response
    matches = PAPER_ANSWER_RE.findall(text[-PAPER_WINDOW:])
    return matches[-1] if matches else None


def paper_correct(response: str, gold: str, strip_tags: bool = True, end_texts: tuple[str, ...] = ()) -> bool:
    """The paper's verdict for ``response`` against ``gold``. Never raises.

    ``strip_tags`` (default) removes the six Parallel-R1 tags and the end-of-turn texts
    (:data:`~pr1_eval.grading.extract.END_OF_TURN_TEXTS` plus ``end_texts``, e.g. the
    tokenizer's ``eos_token``) first, as the paper's ``skip_special_tokens=True`` decode did;
    pass ``False`` to score the raw text as given.
    """
    try:
        text = response if isinstance(response, str) else str(response)
        raw = paper_extract(text, strip_tags, tuple(end_texts))
        prediction = normalize_final_answer(INVALID if raw is None else raw)
        return prediction == normalize_final_answer(str(gold))
    except Exception:  # noqa: BLE001 - a checker must survive any model output
        return False


def _without_special(text: str, specials: tuple[str, ...]) -> str:
    """``text`` minus the special-token strings; only the tail matters, so huge texts are cut first."""
    specials = tuple(t for t in specials if t)
    cut = PAPER_WINDOW * 40
    tail = text[-cut:] if len(text) > cut else text
    for special in specials:
        tail = tail.replace(special, "")
    if len(tail) < PAPER_WINDOW and len(text) > cut:  # the tail was nearly all special tokens
        tail = text
        for special in specials:
            tail = tail.replace(special, "")
    return tail
