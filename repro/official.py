"""The official Parallel-R1 reward rules, as the paper trained with them (our implementation).

The release (``zhengkid/Parallel-R1`` at ``7c3a8f3``, ``verl/verl/utils/reward_score/``) scores
with two readings that are more lenient, or simply different, from pr1-eval's:

* **the format check** (``check_parallel_thinking_format``, in the S2 tiered reward
  ``math_dapo_acc_parallel_interved.py`` and the GSM8K-stage reward
  ``gsm8k_add_special_token_reward.py``): a stack over the six tags in order. ``<Parallel>`` and
  ``<Path>`` push; ``</Path>`` must close a ``<Path>`` on top (and counts one path for the
  innermost open block); ``</Parallel>`` must close a ``<Parallel>`` on top that saw ≥ 2 paths and
  then expects a ``<Summary>``; a ``<Summary>`` that no ``</Parallel>`` asked for fails;
  ``</Summary>`` is ignored altogether; at the end nothing may be open, no summary may still be
  expected, and the ``<Summary>`` count must equal the ``</Parallel>`` count. So nested blocks,
  an unclosed ``<Summary>``, a stray ``</Summary>`` and a ``<Path>`` outside any block all pass —
  where :func:`pr1_eval.protocol.parse.parse_structure`'s strict ``format_ok`` fails them.
* **the GSM8K-stage answer**: the *first* match of ``Final Answer:\\s*([-]?[0-9.,]+)`` in the whole
  response (case-sensitive, answers inside paths included, tags removed first as the official
  ``skip_special_tokens=True`` decode removed them), commas dropped, compared as a string with the
  gold — so a trailing period (``72.``) is wrong and ``**Final Answer:** 72`` or ``$72`` finds
  nothing. The official score is then ``1`` for a right answer in a response with a ``<Parallel>``
  and a passing format check, else ``0``.

Both are reproduced on purpose, quirks included, because they are what the paper's checkpoints were
trained with; :mod:`repro.rewards` uses them by default and keeps pr1-eval's stricter readings as
options (``format_check=strict``, ``gsm8k_answer=grader``).
"""

from __future__ import annotations

import re

from pr1_eval.grading.extract import END_OF_TURN_TEXTS
from pr1_eval.protocol import tags as T

_TAG_RE = re.compile("|".join(re.escape(tag) for tag in T.ALL_TAGS))
_GSM8K_ANSWER_RE = re.compile(r"Final Answer:\s*(-?[0-9.,]+)")
_SPECIAL_RE = re.compile("|".join(re.escape(s) for s in (*T.ALL_TAGS, *END_OF_TURN_TEXTS)))


def official_format_ok(text: str) -> bool:
    """``True`` exactly when ``check_parallel_thinking_format`` returns no error for ``text``."""
    open_tags: list[str] = []
    paths_seen: list[int] = []  # one counter per open <Parallel>, innermost last
    summary_due = False
    summaries = 0
    closes = 0
    for tag in _TAG_RE.findall(text):
        if tag == T.PARALLEL_OPEN:
            open_tags.append(tag)
            paths_seen.append(0)
            summary_due = False
        elif tag == T.PATH_OPEN:
            open_tags.append(tag)
        elif tag == T.PATH_CLOSE:
            if not open_tags or open_tags[-1] != T.PATH_OPEN:
                return False
            open_tags.pop()
            if paths_seen:
                paths_seen[-1] += 1
        elif tag == T.PARALLEL_CLOSE:
            closes += 1
            if not open_tags or open_tags[-1] != T.PARALLEL_OPEN or paths_seen.pop() < 2:
                return False
            open_tags.pop()
            summary_due = True
        elif tag == T.SUMMARY_OPEN:
            if not summary_due:
                return False
            summary_due = False
            summaries += 1
    return not open_tags and not summary_due and summaries == closes


def strip_special(text: str) -> str:
    """``text`` as the official reward saw it: the six tags and end-of-turn texts removed
    (its ``solution_str`` is decoded with ``skip_special_tokens=True``)."""
    return _SPECIAL_RE.sub("", text)


def official_gsm8k_answer(text: str) -> str | None:
    """The answer the official GSM8K-stage reward reads: the first ``Final Answer:`` number of the
    whole (tag-stripped) text, commas removed; ``None`` when there is none."""
    match = _GSM8K_ANSWER_RE.search(strip_special(text))
    return None if match is None else match.group(1).replace(",", "")


def official_gsm8k_correct(text: str, gold: object) -> bool:
    """The official GSM8K-stage verdict: that answer equals the gold string exactly."""
    answer = official_gsm8k_answer(text)
    return answer is not None and answer == str(gold)
