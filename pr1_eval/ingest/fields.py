"""One check per field of an imported row: each bad value is one line naming file, line, field and
what was expected, and nothing is coerced silently.

Why: an import is the one place where data the suite did not write becomes a run, and every
number the reports print is computed from it. ``int(1.5)`` is 1, ``int(True)`` is 1 and
``str(None)`` is ``"None"``, so a lenient reader turns a broken file into plausible numbers. The
rules (decisions, each for the reason given):

* ``sample_idx`` and ``step``: a JSON integer (not ``true``, not ``1.0``, not ``"3"``: a writer that
  means 3 writes 3), non-negative, and small enough for the store's 64-bit integers.
* ``task``: a non-empty string. ``problem_id``: a non-empty string, or a JSON integer (written as
  its decimal digits: a lossless conversion, and the usual way ids are numbered).
* ``gold``: a non-empty string. Anything else (missing, ``null``, ``""``, ``NaN``, a number, a
  list) cannot be compared with an answer, so its samples are stored *could not score*
  (``grade_status='no_gold'``), never graded wrong; the import warns, naming each such line, and
  every report leaves the problem out of its metrics and names it (see
  :mod:`pr1_eval.report.completeness`). A number is not taken as its digits: ``0.1`` and ``1e-1``
  are one number and two golds, so the file has to say which text it means.
* Every string (response, problem, gold, ids, model): valid Unicode, i.e. no lone surrogate
  (``"\\ud800"`` is valid JSON but not text; it would fail only when the run is written, after the
  grading).
"""

from __future__ import annotations

import json
import math
from typing import Any

from pr1_eval.errors import Pr1EvalError

#: The largest value a stored integer column holds (int64).
MAX_INT = 2**63 - 1


def shown(value: Any, limit: int = 40) -> str:
    """A value as the file wrote it (JSON), short and printable: ``1e+30``, ``true``, ``Infinity``."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError):
        text = repr(value).encode("ascii", "backslashreplace").decode("ascii")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def field_error(where: str, name: str, value: Any, expected: str) -> Pr1EvalError:
    return Pr1EvalError(f"{where}: field {name!r} is {shown(value)}; expected {expected}")


def whole_number(value: Any, where: str, name: str) -> int:
    """A non-negative JSON integer that fits the store (see the module docstring)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT:
        raise field_error(where, name, value, "a non-negative whole number such as 3 (no fraction, no quotes, "
                          "not true/false)")
    return value


def lone_surrogate(text: str) -> int | None:
    """Index of the first lone surrogate in ``text`` (not encodable as UTF-8), else None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return int(exc.start)
    return None


def text(value: Any, where: str, name: str, *, required: bool = True) -> str:
    """A string field: valid Unicode; non-empty when ``required``."""
    if not isinstance(value, str) or (required and not value.strip()):
        raise field_error(where, name, value, "a non-empty string" if required else "a string")
    if (at := lone_surrogate(value)) is not None:
        raise Pr1EvalError(f"{where}: field {name!r} holds a lone surrogate ({shown(value[at])}) at character {at}; "
                           "expected valid Unicode text (the writer split a character: re-export the file as UTF-8)")
    return value


def optional_text(value: Any, where: str, name: str) -> str:
    """An optional string field: absent or ``null`` reads as ``""``."""
    return "" if value is None else text(value, where, name, required=False)


def identifier(value: Any, where: str, name: str) -> str:
    """``problem_id``: a non-empty string, or an integer written as its digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return text(value, where, name)


def gold_or_reason(row: dict[str, Any], where: str) -> tuple[str, str | None]:
    """``(gold, None)`` for a usable gold, else ``("", why it cannot be scored)``."""
    if "gold" not in row:
        return "", "is missing"
    value = row["gold"]
    if isinstance(value, float) and math.isnan(value):
        return "", "is NaN"
    if not isinstance(value, str):
        return "", f"is {shown(value)}, not a string (write the answer as text, e.g. \"204\")"
    if not value.strip():
        return "", "is empty"
    return text(value, where, "gold"), None
