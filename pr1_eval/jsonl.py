"""Reading JSON Lines with errors that name file and line: the one reader every stage uses
(benchmarks, imports, lm-eval logs, training sets); and :func:`unique_keys`, the rule every JSON
reader of user files (these lines, VERL dumps, ``run.json``, lm-eval results) follows for a key
that appears twice in one object.

Why refuse a repeated key: :mod:`json` keeps the last value without a word, so
``{"gold": "1", "gold": "2"}`` stored gold "2" and turned a right sample wrong (mean@2 1.000 →
0.750). Which of the two the writer meant cannot be known, so it is an error naming file, line
and key, never a guess.
"""

from __future__ import annotations

import contextlib
import json
import json.decoder
import json.scanner
import re
from collections.abc import Callable, Iterator
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


def unique_keys(where: str, text: str | None = None) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """A ``json.loads`` ``object_pairs_hook``: each object as a dict, or a
    :class:`~pr1_eval.errors.Pr1EvalError` naming ``where``, the line and the key when a key appears
    twice in one object. ``where``: the file (with its line, for JSON Lines); ``text``: the whole
    document, given for a multi-line file so the error can name the line (found only then)."""
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(pairs)
        if len(found) < len(pairs):
            key = _repeated(pairs)
            line = "" if text is None else f":{_repeated_line(text, key)}"
            raise Pr1EvalError(f"{where}{line}: key {key!r} appears twice in one JSON object (a JSON reader keeps "
                               "the last value without a word); remove the one that is wrong")
        return found
    return hook


def _repeated(pairs: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    raise AssertionError("no key repeats")


def _repeated_line(text: str, key: str) -> int:
    """The line of the second ``key`` of the first object that repeats it (the line where that
    object begins when the key is written with escapes). Parsed again in pure Python, which tells
    where each object begins: only on the way to an error."""
    starts: list[int] = []
    found: list[int] = []

    def parse_object(s_and_end: tuple[str, int], *args: Any) -> tuple[dict[str, Any], int]:
        starts.append(s_and_end[1] - 1)
        try:
            return json.decoder.JSONObject(s_and_end, *args)  # type: ignore[attr-defined,no-any-return]
        finally:
            starts.pop()

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if not found and len({k for k, _ in pairs}) < len(pairs):
            found.append(starts[-1])
        return dict(pairs)

    decoder = json.JSONDecoder(object_pairs_hook=hook)
    decoder.parse_object = parse_object  # type: ignore[attr-defined]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    with contextlib.suppress(ValueError, RecursionError):
        decoder.decode(text)
    start = found[0] if found else 0
    spellings = {json.dumps(key, ensure_ascii=False), json.dumps(key)}
    for spelling in spellings:
        places = [m.start() for m in re.finditer(re.escape(spelling) + r"\s*:", text[start:])]
        if len(places) >= 2:
            return text.count("\n", 0, start + places[1]) + 1
    return text.count("\n", 0, start) + 1


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
                row = json.loads(line, object_pairs_hook=unique_keys(where))
            except json.JSONDecodeError as exc:
                raise Pr1EvalError(f"{where}: not valid JSON ({json_reason(exc, line)}){tail}") from None
            except RecursionError:
                raise Pr1EvalError(f"{where}: not valid JSON (nested too deeply to read){tail}") from None
            if not isinstance(row, dict):
                raise Pr1EvalError(f"{where}: expected a JSON object, got {type(row).__name__}{tail}")
            yield where, row
