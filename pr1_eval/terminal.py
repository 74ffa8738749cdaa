"""Data printed to a terminal is shown, never run.

A task name, model path, run name or problem id comes from whoever wrote the run or the import
file. Printed raw, ``"\\x1b[2J"`` clears the reader's screen, ``"\\x1b]8;;URL\\x07"`` makes a
hidden hyperlink, ``"\\x1b]0;…\\x07"`` retitles the window and a carriage return overwrites the
line before it. So every command that prints data (``report``, ``sweep``'s summary,
``leaderboard``, ``analyze``) passes each data value through :func:`terminal_text`, the one
place the rule lives: every control character (C0, DEL and C1, CSI ``\\x9b`` included) becomes
its visible Python escape (``\\x1b``, ``\\n``), so nothing reaches the terminal as a command and
the reader sees that something was there. Printable text, non-ASCII included, is unchanged.
The surrounding layout (our own newlines, padding) is never data and is not touched.

``--json`` output is data too: JSON escapes C0 controls itself, but with ``ensure_ascii=False``
(kept so non-ASCII names stay readable) DEL and the C1 range pass through raw, and ``\x9b`` is a
CSI to many terminals. :func:`terminal_json` writes those as ``\\uXXXX`` escapes, which every JSON
parser reads back to the same string, so piping the output to ``jq`` or ``json.loads`` loses nothing.
"""

from __future__ import annotations

import json
import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def terminal_text(value: Any) -> str:
    """``value`` as text a terminal shows and never runs (see the module docstring)."""
    text = str(value)
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


_JSON_RAW_CONTROL = re.compile(r"[\x7f-\x9f]")


def terminal_json(document: Any, *, indent: int | None = 2, default: Any = None) -> str:
    """``document`` as JSON text safe to print (see the module docstring): non-ASCII printable text
    stays as it is, DEL and C1 controls become ``\\uXXXX`` escapes (C0 ones JSON escapes itself)."""
    text = json.dumps(document, indent=indent, ensure_ascii=False, default=default)
    return _JSON_RAW_CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
