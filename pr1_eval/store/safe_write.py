"""Writing files that a kill or a full disk never leaves half-done, and the one "disk full" message.

Why: an output written in place (``leaderboard --html``, ``analyze``'s tables, a cache entry) and
killed mid-write is a 0-byte or cut-short file that looks like a result; a full disk surfaced as
``OSError: [Errno 28]`` from somewhere deep is a traceback, not advice. So every writer goes
through :func:`atomic_output` (a temporary file in the target's folder, fsynced, renamed over the
target: a reader sees the old file or the new one, never a part) and turns ``ENOSPC``/``EDQUOT``
into :func:`pr1_eval.errors.no_space` ("no space left on DIR (need about N MB)"), the same line from every
command. What was stored before stays intact (the temporary file is removed), and rerunning the
command once space is freed resumes where it stopped.

Any other reason an output cannot be written (a read-only disk, a file where a folder is needed,
``/proc``, no permission) is :func:`~pr1_eval.output_paths.cannot_write`: one line naming the path, the reason and the
fix, never an ``OSError`` traceback. The translation lives here, where outputs are written, so
every command that writes through :func:`atomic_output` (or checks its target first with
:func:`~pr1_eval.output_paths.check_output_target`) says the same.

Temporary files: a SIGKILL between ``mkstemp`` and the rename leaves ``.NAME.PID-XXXX.tmp``
beside the target (no ``finally`` runs); the next write into that folder removes it
(:mod:`pr1_eval.output_paths`, which also holds :func:`~pr1_eval.output_paths.cannot_write`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO, cast

from pr1_eval.errors import is_disk_full, no_space
from pr1_eval.output_paths import output_errors, refuse_non_regular, temporary_in
from pr1_eval.output_paths import refuse_run_file as refuse_run_file  # re-exported: its old home


@contextmanager
def disk_full_errors(folder: str | Path, need_bytes: int | None = None, what: str = "") -> Iterator[None]:
    """Turn ENOSPC/EDQUOT raised in the block into :func:`no_space` (other errors pass through)."""
    try:
        yield
    except OSError as exc:
        if is_disk_full(exc):
            raise no_space(folder, need_bytes, what) from None
        raise


@contextmanager
def atomic_output(path: str | Path, *, need_bytes: int | None = None) -> Iterator[BinaryIO]:
    """A binary file handle whose contents replace ``path`` only when the block ends without
    error (temporary file in the same folder, fsync, rename). A full disk is :func:`no_space`,
    any other write failure :func:`~pr1_eval.output_paths.cannot_write` (see the module docstring)."""
    path = Path(path)
    refuse_non_regular(path, "")  # a device node or FIFO is never renamed over (see output_paths)
    with output_errors(path, need_bytes):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = temporary_in(path.parent, path.name)
    try:
        with output_errors(path, need_bytes):
            with os.fdopen(fd, "wb") as handle:
                yield cast(BinaryIO, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o644)  # mkstemp's 0600 would make an output page unreadable to others
            os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: str | Path, data: str | bytes, encoding: str = "utf-8") -> Path:
    """Write ``data`` to ``path`` with :func:`atomic_output`; returns the path."""
    raw = data.encode(encoding) if isinstance(data, str) else data
    with atomic_output(path, need_bytes=len(raw)) as handle:
        handle.write(raw)
    return Path(path)
