"""The field readers of ``run.json``: each checks one value's type and names the file and field of a bad one.

Why a module of their own: the run record (:mod:`.run`) and the sections it holds as records
(:mod:`.training`, the step summary) read their fields with the same rules and the same error
shape; the sections cannot import them from :mod:`.run`, which imports the sections.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from pr1_eval.errors import Pr1EvalError


def doc_field(text: str, default: Any = dataclasses.MISSING, factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field whose documentation travels with it (``field.metadata['doc']``): the records'
    fields are documented where they are declared, and the docs are generated from them."""
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata={"doc": text})
    if default is not dataclasses.MISSING:
        return dataclasses.field(default=default, metadata={"doc": text})
    return dataclasses.field(metadata={"doc": text})


def run_error(where: str, field_name: str, problem: str,
              fix: str = "fix the file (or rerun the run that wrote it)") -> Pr1EvalError:
    """``run.json: field 'model.step' …``: the one shape of every run-record error."""
    return Pr1EvalError(f"{where}: field {field_name!r} {problem}; {fix}")



# ----- reading ----------------------------------------------------------------------
# Why strict: a run record decides what a report averages (each task's problems and k) and how
# analysis groups runs (model path, step, family). A hand-edited ``"k": "sixteen"`` or a ``model`` that
# is a string, read through ``.get(...)`` defaults, would silently become "no k" or "no step"; read
# strictly, it is one error that names the file and the field. Integers written as floats (``16.0``) or digit
# strings (``"200"`` for a step) are accepted, since JSON tools write both.


def read_int(value: Any, where: str, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise run_error(where, name, f"must be an integer, found {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and not math.isnan(value) and value == int(value):
        return int(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise run_error(where, name, f"must be an integer, found {value!r}")


#: The largest integer a run record holds: the readers of runs (pandas, parquet, numpy) carry these
#: numbers as int64, so a larger one (a VERL step file named ``99999999999999999999.jsonl``)
#: would be read here and fail later, elsewhere, as ``OverflowError``.
MAX_INT64 = 2**63 - 1


def read_count(value: Any, where: str, name: str, low: int = 0) -> int | None:
    """:func:`read_int`, then in ``[low, 2**63 - 1]``: a ``k`` of 0 or -1, a negative step or a
    step past int64 is refused here, where every reader of a run record reads it."""
    number = read_int(value, where, name)
    if number is not None and not low <= number <= MAX_INT64:
        raise run_error(where, name, f"must be a whole number from {low} to {MAX_INT64}, found {number}")
    return number


def read_str(value: Any, where: str, name: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)  # a numeric task version or revision written without quotes
    raise run_error(where, name, f"must be a string, found {type(value).__name__}")


def read_object(value: Any, where: str, name: str) -> dict[str, Any] | None:
    if value is None or isinstance(value, dict):
        return value
    raise run_error(where, name, f"must be a JSON object, found {type(value).__name__}")


def read_list(value: Any, where: str, name: str) -> list[Any] | None:
    if value is None or isinstance(value, list):
        return value
    raise run_error(where, name, f"must be a JSON list, found {type(value).__name__}")


def read_bool(value: Any, where: str, name: str) -> bool | None:
    """True, false or null; anything else (``"yes"``, 1) is refused rather than read as truthy."""
    if value is None or isinstance(value, bool):
        return value
    raise run_error(where, name, f"must be true or false, found {value!r}")


def read_float(value: Any, where: str, name: str) -> float | None:
    """A number (an integer reads as its float); true/false and strings are refused."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise run_error(where, name, f"must be a number, found {value!r}")
