"""Reading JSON Lines with errors that name file and line: the one reader every stage uses
(benchmarks, imports, lm-eval logs, training sets)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError


def json_reason(exc: json.JSONDecodeError, line: str) -> str:
    """The whole reason of a JSON error, with its column: ``exc.msg`` alone is cut mid-phrase
    (``"Invalid control character at"``: json appends the place after it). A line that ends
    before its object closes says so, since that is what a file cut short looks like."""
    reason = f"{exc.msg}{'' if exc.msg.endswith(' at') else ' at'} column {exc.colno}"
    text = line.rstrip("\r\n")
    if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated"):
        reason += f"; the line ends at column {len(text)} before the JSON value closes, so it looks cut short"
    elif exc.msg.startswith("Invalid control character"):
        reason += f" ({text[exc.pos]!r} inside a string: escape it, e.g. as \\n or \\t)"
    return reason


def iter_jsonl(path: str | Path, *, hint: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``("FILE:LINE", object)`` for each non-blank line.

    Lines are split on ``\\n`` only (binary file iteration), never ``str.splitlines``: real traces
    contain U+2028, which ``splitlines`` would treat as a line break. Each line is decoded on its
    own, so a byte that is not UTF-8 is reported at its line (a text-mode reader decodes in
    blocks and fails with a bare traceback, lines ahead of or behind the byte). ``hint`` is
    appended to errors (e.g. what file was expected).
    """
    path = Path(path)
    if not path.is_file():
        raise Pr1EvalError(f"{path}: file not found{'; ' + hint if hint else ''}")
    tail = f"; {hint}" if hint else ""
    with path.open("rb") as handle:
        for lineno, data in enumerate(handle, start=1):
            where = f"{path}:{lineno}"
            try:
                line = data.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise Pr1EvalError(f"{where}: not UTF-8 text (byte {exc.start + 1} of the line is "
                                   f"0x{data[exc.start]:02x}); save the file as UTF-8{tail}") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise Pr1EvalError(f"{where}: not valid JSON ({json_reason(exc, line)}){tail}") from None
            except RecursionError:
                raise Pr1EvalError(f"{where}: not valid JSON (nested too deeply to read){tail}") from None
            if not isinstance(row, dict):
                raise Pr1EvalError(f"{where}: expected a JSON object, got {type(row).__name__}{tail}")
            yield where, row
