"""One writer per run: the exclusive OS lock every command that writes a run holds for the whole write.

Why: two writers of one run folder overwrite each other's parts, both pass a "holds a run" check
before either writes, or swap the samples away under a run still appending; the result is a run
that every reader refuses, or one that silently is not what the command that exited 0 wrote. So
``run``, ``sweep``, ``import``, ``import-verl``, ``merge``, ``regrade`` and repro's rollout writer
take :func:`run_lock` around everything they do to a run, including the "does it already hold a
run" check, which makes the check and the write one atomic step.

How: ``fcntl.flock`` on a lock file *beside* the run folder (``PARENT/.NAME.lock``), not inside
it, because ``import --replace`` and ``import-verl`` move a run folder away while they hold its
lock, and the lock must stay with the path being written, not with the folder that moved. An
OS lock dies with its process, so a SIGKILL never leaves a stale lock; the file is removed when
the lock is released (a killed holder leaves it behind, harmlessly: it is not locked). A second
writer is refused at once, never queued, with a message naming the holder, which writes its
command, pid and start time into the file. Taking the lock is re-entrant within one process (a
sweep holds a checkpoint's lock while ``run``'s code takes it again), and a forked child drops its
copy of the lock (:func:`_forget_in_child`). Readers never take it: they
read a consistent snapshot (see :meth:`pr1_eval.store.run_store.RunStore.read_table`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pr1_eval.errors import Pr1EvalError

LOCK_SUFFIX = ".lock"

_held: dict[str, int] = {}  # lock path -> depth, for the locks this process holds
_fds: dict[str, int] = {}  # lock path -> the descriptor holding it


def _forget_in_child() -> None:
    """A forked child (an engine's worker processes) must not keep its parent's locks: an flock
    lives as long as any copy of its descriptor, so a child outliving a killed writer would hold
    the run. The child closes its copies (the parent's lock is untouched) and holds nothing."""
    for fd in _fds.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _fds.clear()
    _held.clear()


os.register_at_fork(after_in_child=_forget_in_child)


class RunBusy(Pr1EvalError):
    """Another process holds the run's writer lock."""


def lock_path(run_dir: str | Path) -> Path:
    """``PARENT/.NAME.lock``: the lock file of the run folder ``run_dir`` (resolved, so every
    spelling of one folder shares one lock)."""
    path = Path(run_dir).expanduser().resolve()
    return path.with_name(f".{path.name}{LOCK_SUFFIX}")


def holder(run_dir: str | Path) -> str | None:
    """Who holds ``run_dir``'s writer lock (``pr1-eval run, pid 12, since …``), or None when no
    one does. Never blocks; what the owner wrote may be empty for the instant after it locked."""
    path = lock_path(run_dir)
    if str(path) in _held:
        return "this process"
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _describe(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def held_by_another(run_dir: str | Path) -> bool:
    """Another process holds ``run_dir``'s writer lock (this process holding it does not count)."""
    return str(lock_path(run_dir)) not in _held and holder(run_dir) is not None


def _describe(fd: int) -> str:
    """The holder as it wrote itself into the lock file."""
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
    except (OSError, ValueError):
        data = {}
    if not data:
        return "another process (it has just started)"
    return f"`{data.get('command', '?')}` (pid {data.get('pid', '?')}, since {data.get('since', '?')})"


def _open_locked(path: Path, wait_s: float) -> int:
    """An fd holding the exclusive lock of ``path``; RunBusy when it is held (after ``wait_s``)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise Pr1EvalError(f"cannot take the writer lock {path} ({exc.strerror or exc}); "
                               "the folder above the run must be writable") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = _describe(fd)
            os.close(fd)
            if time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            raise RunBusy(f"{path.with_name(path.name[1:-len(LOCK_SUFFIX)])} is being written by {who}; one "
                          "writer per run: wait for it to finish, or write to another folder") from None
        try:  # the file may have been removed by a releasing holder between our open and flock
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


@contextmanager
def run_lock(run_dir: str | Path, command: str, *, wait_s: float = 0.0) -> Iterator[None]:
    """Hold ``run_dir``'s writer lock for the block (module docstring). ``command`` names this
    writer in the message another writer gets (``pr1-eval import``). ``wait_s``: how long to wait
    for a holder to finish before refusing (0: refuse at once)."""
    path = lock_path(run_dir)
    key = str(path)
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    fd = _open_locked(path, wait_s)
    try:
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"command": command, "pid": os.getpid(), "since": since}).encode(), 0)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):  # a full disk: the lock still holds
            os.close(fd)
            raise
    _held[key], _fds[key] = 1, fd
    try:
        yield
    finally:
        del _held[key], _fds[key]
        with contextlib.suppress(OSError):
            os.unlink(path)  # while still locked: a waiter that opened it retries on the new file
        os.close(fd)
