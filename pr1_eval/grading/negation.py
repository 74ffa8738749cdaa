"""When an answer sentence only rejects a value: ``The answer is not 5.``, ``5 is not possible``.

Such a sentence names the value it excludes, and math-verify, handed the whole line, reads that
value as the answer (``The answer is not 5.`` graded right against 5). pr1-eval reads it as
**no answer** (``grade_status='no_answer'``, ``correct=False``), not as *could not score*
(``correct=None``): the house rule keeps "could not score" for a grader that failed to reach a
verdict on an answer it has (a math-verify timeout or error), and such samples leave the scores;
here the line is read to the end and states no value, which is the model's failure, like an empty
answer line. Counting it as unscorable would drop evasive answers from the denominators and
raise a model's accuracy for writing them.

What counts (:func:`rejects_one_value`): a negated sentence (see
:func:`pr1_eval.grading.answer_text._read_prose`) whose values form one group joined by *and*/*or*
(``It is not 5 or 6.``), with no *but* (``not 5 but 6`` states 6). Such a sentence is passed
over; a later sentence that states a value gives the answer (``The answer is not 5. It is 6.``
→ ``6``), and a line of nothing else has none (rule ``negated``). A negated answer line is the
model's last word, so the search does not fall back to an earlier ``Final Answer:`` line or box.
Any other negated sentence (``x is not 0, so x = 5``: two values) is read whole;
a negation after the value (``5, not 6``) is trailing prose and was cut before this is asked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: Rule name of a line whose only valued sentences reject their value (no answer).
NEGATED_RULE = "negated"
_BUT_RE = re.compile(r"\bbut\b|\bsino\b|\bmais\b|\baber\b|\bma\b|\bmas\b", re.IGNORECASE)


def rejects_one_value(sentence: str, found: Sequence[tuple[str, bool]]) -> bool:
    """Whether a negated ``sentence`` with the values ``found`` in it (``(value, joined to the
    previous)``, :func:`pr1_eval.grading.answer_text.values`) only rejects one value or one group."""
    return bool(found) and all(joined for _, joined in found[1:]) and _BUT_RE.search(sentence) is None
