"""Output paths: the one-line error for one that cannot be written, and our temporary files.

Why a flat module, below every folder: the output helpers of :mod:`pr1_eval.store.safe_write`
are needed by the analysis cache writer and by ``analyze``'s and ``leaderboard``'s checks of
their targets, which load while the CLI's parser is built, when no store module may load. So
what they share lives here, with the standard library and :mod:`pr1_eval.errors` only.

* :func:`cannot_write` / :func:`output_errors`: an ``OSError`` while writing an output (a
  read-only disk, a file where a folder is needed, ``/proc``, no permission) is one line naming
  the path, the reason and the fix; a full disk is :func:`pr1_eval.errors.no_space`.
* :func:`check_output_target`: the same refusals before any work, where they can be seen; it is
  the one guard every output option goes through (``leaderboard --html``, ``replay --html``,
  ``analyze --out``), so it also refuses a run's own files (:func:`refuse_run_file`) and a target
  that exists but is not a regular file (:func:`refuse_non_regular`: a device node or a FIFO,
  which the atomic rename would replace: as root, ``--html /dev/null`` replaced the system's
  ``/dev/null``). The atomic writer repeats the second check at write time.
* :func:`temporary_in` / :func:`remove_stale_temporaries`: a temporary file is named
  ``.NAME.PID-XXXX.tmp``; a SIGKILL before its rename leaves it (no ``finally`` runs), and the
  next write into that folder removes every one whose writer (the pid) is gone or that is older
  than :data:`STALE_SECONDS`. A live writer's file is never touched.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pr1_eval.errors import Pr1EvalError, is_disk_full, no_space

#: A temporary file of ours older than this is a leftover even when its pid now belongs to another
#: process (pids are reused). Wide on purpose: a multi-GB table written to a slow disk takes
#: minutes between create and rename, never a quarter of an hour.
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
    refuse_run_file(path, option, folder=folder)
    if not folder:
        refuse_non_regular(path, option)
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


def refuse_run_file(path: str | Path, option: str, *, folder: bool = False) -> None:
    """An output option naming a run's own files (``--html RUN/run.json``, a part under
    ``samples.parquet``), or any file called ``run.json`` (which would make its folder look like a
    run to every search), or (for a file option) a folder, is refused before anything is computed.
    ``folder``: ``path`` is a folder the outputs go in; it may not lie inside ``samples.parquet``."""
    target = Path(path).expanduser().resolve()
    inside = (target, *target.parents) if folder else target.parents
    if (not folder and target.name == "run.json") or any(p.name.startswith("samples.parquet") for p in inside):
        raise Pr1EvalError(f"{option} {path}: that is a run's own file; writing it would destroy the run's record "
                           "or samples. Pass another file name (e.g. leaderboard.html)")
    if not folder and target.is_dir():
        raise Pr1EvalError(f"{option} {path} is a folder; pass a file name inside it")


def refuse_non_regular(path: str | Path, option: str) -> None:
    """Refuse an existing target that is not a regular file (a device node, a FIFO, a socket): the
    atomic writer renames its temporary file over the target, which would replace the node itself
    (``/dev/null`` becoming a regular file, as root); writing through one instead could block
    forever on a FIFO with no reader. A link is followed: what it points at is judged."""
    try:
        mode = os.stat(Path(path).expanduser()).st_mode
    except OSError:
        return  # absent (or unreadable): the write itself says what is wrong
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return  # a folder is refused by the caller's own check, with its own advice
    kind = ("a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode)
            else "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")
    where = f"{option} {path}" if option else str(path)
    raise Pr1EvalError(f"{where}: it is {kind}, not a regular file; writing would replace it. Pass a regular file "
                       "name (to discard the output, write it to a scratch file and delete it)")


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
