"""User-facing errors: each says what went wrong, where, and how to fix it.

The CLI prints these as one clear message (no traceback) and exits with status 2. A full disk has
one message wherever it happens (:func:`no_space`), which every writer and the CLI use.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path


class Pr1EvalError(Exception):
    """An error caused by the user's input or environment, with a fix in its message."""


def describe_exception(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line, for quoting a library's error inside ours.

    A long message is shortened at a sentence end (else at a space), never inside a word or a
    URL, and marked with ``…``.
    """
    text = " ".join(str(exc).split())
    if len(text) > limit:
        sentence = max(text.rfind(". ", 0, limit), text.rfind("; ", 0, limit))
        cut = sentence + 1 if sentence > limit // 3 else text.rfind(" ", 0, limit)
        text = (text[:cut] if cut > 0 else text.split(" ", 1)[0]).rstrip() + " …"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


FULL = (errno.ENOSPC, errno.EDQUOT)


def is_disk_full(exc: BaseException) -> bool:
    """``exc`` is "no space left" (or a quota exceeded): by errno, or by the text pyarrow's C++
    writers put in an OSError that carries no errno."""
    if not isinstance(exc, OSError):
        return False
    text = str(exc).lower()
    return exc.errno in FULL or "no space left on device" in text or "disk quota exceeded" in text


def _free_mb(folder: Path) -> float | None:
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    try:
        return shutil.disk_usage(existing).free / 1e6 if existing is not None else None
    except OSError:
        return None


def no_space(folder: str | Path, need_bytes: int | None = None, what: str = "") -> Pr1EvalError:
    """The one-line error for a full disk: where, about how much is needed, that nothing stored was
    lost, and how to go on."""
    folder = Path(folder)
    need = f" (need about {max(need_bytes / 1e6, 0.1):.1f} MB" if need_bytes else " ("
    free = _free_mb(folder)
    need += (", " if need_bytes else "") + (f"{free:.1f} MB free)" if free is not None else "free space unknown)")
    doing = f" while writing {what}" if what else ""
    return Pr1EvalError(f"no space left on {folder}{need}{doing}; what was stored before is intact: free some space "
                        "and rerun the same command, which resumes")
