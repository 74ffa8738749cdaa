"""User-facing errors: each says what went wrong, where, and how to fix it.

The CLI prints these as one clear message (no traceback) and exits with status 2.
"""


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
