"""User-facing errors: each says what went wrong, where, and how to fix it.

The CLI prints these as one clear message (no traceback) and exits with status 2.
"""


class Pr1EvalError(Exception):
    """An error caused by the user's input or environment, with a fix in its message."""
