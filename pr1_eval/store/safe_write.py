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
``/proc``, no permission) is :func:`cannot_write`: one line naming the path, the reason and the
fix, never an ``OSError`` traceback. The translation lives here, where outputs are written, so
every command that writes through :func:`atomic_output` (or checks its target first with
:func:`check_output_target`) says the same.

Temporary files: a SIGKILL between ``mkstemp`` and the rename leaves ``.NAME.PID-XXXX.tmp``
beside the target (no ``finally`` runs). Its name carries the writer's pid, so the next write to
any file of that folder removes the ones whose writer is gone or that are older than
:data:`STALE_SECONDS` (:func:`remove_stale_temporaries`); a live writer's file is never touched.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO, cast

from pr1_eval.errors import Pr1EvalError, is_disk_full, no_space


@contextmanager
def disk_full_errors(folder: str | Path, need_bytes: int | None = None, what: str = "") -> Iterator[None]:
    """Turn ENOSPC/EDQUOT raised in the block into :func:`no_space` (other errors pass through)."""
    try:
        yield
    except OSError as exc:
        if is_disk_full(exc):
            raise no_space(folder, need_bytes, what) from None
        raise


#: A temporary file of ours older than this is a leftover even if its pid now belongs to another
#: process (pids are reused): no write of ours takes that long between create and rename... except a
#: multi-GB table on a slow disk, so the margin is wide.
STALE_SECONDS = 15 * 60

_OURS = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)-[A-Za-z0-9_]+\.tmp$")

_REASONS = {
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EEXIST: "a file is in the way where a folder is needed",
    errno.ENOTDIR: "a file is in the way where a folder is needed",
    errno.EISDIR: "it is a folder",
    errno.ENOENT: "that place does not take new files (or a folder on the way is missing)",
    errno.ENAMETOOLONG: "the name is too long",
}


def cannot_write(path: str | Path, exc: OSError, what: str = "") -> Pr1EvalError:
    """The one-line error for an output that cannot be written: what, where, why, how to fix."""
    reason = _REASONS.get(exc.errno or 0) or (exc.strerror or str(exc)).lower()
    blocker = _file_in_the_way(Path(path))
    if blocker is not None:
        reason = f"{blocker} is a file, not a folder"
    doing = f"{what} " if what else ""
    return Pr1EvalError(f"cannot write {doing}{path}: {reason}; pass a path in a folder you can write "
                        "(nothing was written there)")


def _file_in_the_way(path: Path) -> Path | None:
    """The first existing non-folder among ``path``'s parents (``afile`` of ``afile/lb.html``)."""
    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            return parent
    return None


@contextmanager
def output_errors(path: str | Path, need_bytes: int | None = None, what: str = "") -> Iterator[None]:
    """Turn any OSError raised in the block while writing ``path``: a full disk into
    :func:`no_space` (naming ``path``'s folder), anything else into :func:`cannot_write`."""
    try:
        yield
    except OSError as exc:
        if is_disk_full(exc):
            raise no_space(Path(path).parent, need_bytes, what or str(path)) from None
        raise cannot_write(path, exc, what) from None


def check_output_target(path: str | Path, option: str, *, folder: bool = False) -> None:
    """Refuse, before any work, an output ``path`` that cannot be written (``folder``: ``path`` is
    the folder the outputs go in): a file in the way, a read-only disk, no permission. Best effort
    (nothing is created here; ``/proc`` passes and is caught by :func:`output_errors` on write)."""
    path = Path(path).expanduser()
    if folder and path.exists() and not path.is_dir():
        raise Pr1EvalError(f"{option} {path} is a file, not a folder; pass a folder for the outputs "
                           "(it is created if missing)")
    existing = next((p for p in (path if folder else path.parent, *path.parents) if p.exists()), Path("."))
    blocker = _file_in_the_way(path if folder else path.parent) or (None if existing.is_dir() else existing)
    if blocker is not None:
        raise Pr1EvalError(f"{option} {path}: {blocker} is a file, not a folder; pass a path in a folder you "
                           "can write")
    if not os.access(existing, os.W_OK | os.X_OK):
        reason = "read-only file system" if _read_only(existing) else "permission denied"
        raise Pr1EvalError(f"{option} {path}: cannot write in {existing} ({reason}); pass a path in a folder "
                           "you can write")


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def temporary_in(folder: Path, name: str) -> tuple[int, str]:
    """A new temporary file for ``folder/name`` (``mkstemp``), named ``.NAME.PID-XXXX.tmp`` so a
    later write can tell a dead writer's leftover (:func:`remove_stale_temporaries`)."""
    remove_stale_temporaries(folder)
    return tempfile.mkstemp(dir=folder, prefix=f".{name}.{os.getpid()}-", suffix=".tmp")


def remove_stale_temporaries(folder: Path, now: float | None = None) -> list[Path]:
    """Remove the temporary files of ours in ``folder`` whose writer process is gone or that are
    older than :data:`STALE_SECONDS`; the removed paths. Never raises (a cleanup, not a write)."""
    removed: list[Path] = []
    now = time.time() if now is None else now
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = _OURS.match(entry.name)
        if match is None or int(match["pid"]) == os.getpid():
            continue
        try:
            if _pid_alive(int(match["pid"])) and now - entry.stat().st_mtime < STALE_SECONDS:
                continue
            os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process (or a pid this system cannot hold): not ours to judge
    return True


@contextmanager
def atomic_output(path: str | Path, *, need_bytes: int | None = None) -> Iterator[BinaryIO]:
    """A binary file handle whose contents replace ``path`` only when the block ends without
    error (temporary file in the same folder, fsync, rename). A full disk is :func:`no_space`,
    any other write failure :func:`cannot_write` (see the module docstring)."""
    path = Path(path)
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


def refuse_run_file(path: str | Path, option: str) -> None:
    """An output option naming a run's own files (``--html RUN/run.json``, a part under
    ``samples.parquet``), or any file called ``run.json`` (which would make its folder look like a
    run to every search), or a folder, is refused before anything is computed."""
    target = Path(path).expanduser().resolve()
    if target.name == "run.json" or any(p.name.startswith("samples.parquet") for p in target.parents):
        raise Pr1EvalError(f"{option} {path}: that is a run's own file; writing it would destroy the run's record "
                           "or samples. Pass another file name (e.g. leaderboard.html)")
    if target.is_dir():
        raise Pr1EvalError(f"{option} {path} is a folder; pass a file name inside it")
