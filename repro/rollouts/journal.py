"""A rollout writer's journal: every rollout a reward worker admits is on disk before it is buffered.

Why: a writer buffers rollouts and writes them into their step's run in chunks (one parquet part
per chunk, under the lock every worker shares). A worker killed between two chunks (SIGKILL, an
out-of-memory kill, a Ray actor restart) would take its buffer with it and leave the step
``running`` forever. So each admitted rollout is first appended, as one JSON line, to a segment
file of the worker's journal (``DIR/.journal/<token>.<kind>.<step>.<seq>.jsonl``). Each line is
one ``write(2)`` of an ``O_APPEND`` descriptor: once ``add`` returns, the row survives the death
of the process; the writer's background loop ``fsync``-s the segments about once a second (and a
segment when it is sealed), so a machine crash loses at most that second. A segment is sealed when its rows are handed to a flush and
deleted once they are in the run (the run's ledger records them first), so the journal holds
only the rows not yet in a run: about ``chunk`` rows per step in flight per worker.

Who replays a dead worker's rows: any later writer, under the shared lock. A worker holds an
exclusive ``flock`` on ``<token>.lock`` for its whole life; a token whose lock can be taken (or
whose lock file is gone) is dead, and its segments are read back and written like fresh rows.
The run's ledger keys every rollout by (uid, session), so a row that reached the run before its
worker died is not stored again: each row is stored exactly once.

At the end of a job there is no later writer: the trainer's driver exits and Ray kills the reward
workers, whose ``close`` (an ``atexit`` hook) may never run, so the rows of the last
``max_wait_s`` would stay journaled. The command that ran the job replays them once the workers
are gone (:mod:`repro.rollouts.finish`), with the options the dead writer recorded beside its
journal (``<token>.options.json``, :meth:`Journal.record_options`): the expected rows and strides
it used, not a second guess at them.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pr1_eval.records.sample import SampleRecord
from repro.rollouts.records import Rollout

JOURNAL_DIR = ".journal"
OPTIONS_SUFFIX = ".options.json"
KIND_TAGS = {"train": "train", "validation": "val"}
log = logging.getLogger(__name__)


def encode(rollout: Rollout, attempt: str) -> bytes:
    """One journal line: the rollout and the attempt of the job that scored it."""
    row = {"attempt": attempt, "kind": rollout.kind, "step": rollout.step, "uid": rollout.uid,
           "session": rollout.session, "record": rollout.record.to_row()}
    return (json.dumps(row, ensure_ascii=False, default=str) + "\n").encode("utf-8")


def decode(line: bytes) -> tuple[str, Rollout]:
    row = json.loads(line)
    record = SampleRecord.from_row(row["record"])
    return str(row["attempt"]), Rollout(str(row["kind"]), int(row["step"]), str(row["uid"]), row["session"], record)


@dataclass
class DeadJournal:
    """A dead writer's segments, its lock file, and the lock held on it while they are replayed."""

    token: str
    segments: list[Path]
    lock_path: Path
    lock_fd: int | None

    @property
    def options_path(self) -> Path:
        return self.lock_path.with_name(self.token + OPTIONS_SUFFIX)

    def rows(self) -> Iterator[tuple[str, Rollout]]:
        """(attempt, rollout) of every whole line; a line cut short by the kill is skipped, said once."""
        for segment in self.segments:
            for n, line in enumerate(segment.read_bytes().splitlines(), 1):
                try:
                    yield decode(line)
                except (ValueError, KeyError, TypeError):
                    log.warning("rollout runs: %s line %d is not a whole journal line (cut by the kill?); "
                                "skipped", segment, n)

    def remove(self) -> None:
        for segment in self.segments:
            segment.unlink(missing_ok=True)
        self.options_path.unlink(missing_ok=True)
        self.lock_path.unlink(missing_ok=True)
        if self.lock_fd is not None:
            os.close(self.lock_fd)


class Journal:
    """One writer's journal (module docstring). Not thread-safe: the writer calls it under its mutex."""

    def __init__(self, root: Path) -> None:
        self.dir = root / JOURNAL_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        host = socket.gethostname().replace(".", "_")  # the token is the file name up to its first dot
        self.token = f"{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        # locked before it gets its name, so no other writer ever sees it unlocked while this one lives
        tmp = self.dir / f".{self.token}.lock.tmp"
        self._lock_fd: int | None = os.open(tmp, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        os.replace(tmp, self.dir / f"{self.token}.lock")
        self._open: dict[tuple[str, int], tuple[int, Path]] = {}
        self._seq = 0
        self._unsynced: set[int] = set()

    def record_options(self, options: dict[str, Any]) -> None:
        """Write the writer's options beside its journal, for whoever replays it after its death."""
        path = self.dir / f"{self.token}{OPTIONS_SUFFIX}"
        tmp = path.with_name("." + path.name + ".tmp")
        tmp.write_text(json.dumps(options, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    def append(self, rollout: Rollout, attempt: str) -> None:
        key = (rollout.kind, rollout.step)
        if key not in self._open:
            self._seq += 1
            path = self.dir / f"{self.token}.{KIND_TAGS[rollout.kind]}.{rollout.step}.{self._seq}.jsonl"
            self._open[key] = (os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644), path)
        fd, _ = self._open[key]
        data = encode(rollout, attempt)
        while data:  # one write(2) in practice; a short write (a full disk) is retried or raises
            data = data[os.write(fd, data):]
        self._unsynced.add(fd)

    def seal(self, key: tuple[str, int]) -> Path | None:
        """Close the key's current segment (its rows go to a flush) and return it; the next row
        of the key starts a new segment."""
        entry = self._open.pop(key, None)
        if entry is None:
            return None
        fd, path = entry
        self._unsynced.discard(fd)
        os.fsync(fd)
        os.close(fd)
        return path

    def sync(self) -> None:
        """fsync the segments written since the last sync (a machine crash loses at most this interval)."""
        for fd in list(self._unsynced):
            os.fsync(fd)
        self._unsynced.clear()

    def close(self) -> None:
        """Seal every open segment and give up the lock: what is left (rows a failed flush could
        not write) is then a dead journal, replayed by the next writer."""
        for key in list(self._open):
            self.seal(key)
        if self._lock_fd is not None:
            if not any(self.dir.glob(f"{self.token}.*.jsonl")):
                (self.dir / f"{self.token}{OPTIONS_SUFFIX}").unlink(missing_ok=True)
                (self.dir / f"{self.token}.lock").unlink(missing_ok=True)
            os.close(self._lock_fd)
            self._lock_fd = None


def dead_journals(root: Path, own: str | None) -> list[DeadJournal]:
    """Every journal under ``root`` whose writer is gone, each with its lock now held by the caller.
    Call under the writers' shared lock (two replays of one journal would be stored once anyway,
    by the ledger, but would cost the work twice)."""
    folder = root / JOURNAL_DIR
    if not folder.is_dir():
        return []
    segments: dict[str, list[Path]] = {}
    for path in folder.glob("*.jsonl"):
        segments.setdefault(path.name.split(".", 1)[0], []).append(path)
    tokens = set(segments) | {p.name[: -len(".lock")] for p in folder.glob("*.lock")}
    dead = []
    for token in sorted(tokens - {own}):
        lock_path = folder / f"{token}.lock"
        with _try_lock(lock_path) as (alive, fd):
            if alive:
                continue
            dead.append(DeadJournal(token, sorted(segments.get(token, []), key=_seq_of), lock_path, fd))
    return dead


@contextmanager
def _try_lock(path: Path) -> Iterator[tuple[bool, int | None]]:
    """(True, None) while the file's writer holds it; (False, fd) with the lock taken, or (False,
    None) when the lock file is gone (its writer closed with rows left over)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        yield False, None
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        yield True, None
        return
    yield False, fd


def live_writers(root: Path) -> list[str]:
    """The tokens under ``root`` whose writer still holds its lock (is alive)."""
    folder = root / JOURNAL_DIR
    live = []
    for lock_path in sorted(folder.glob("*.lock")) if folder.is_dir() else []:
        with _try_lock(lock_path) as (alive, fd):
            if alive:
                live.append(lock_path.name[: -len(".lock")])
            elif fd is not None:
                os.close(fd)  # closing drops the lock this call took
    return live


def _seq_of(path: Path) -> int:
    parts = path.name.split(".")
    return int(parts[-2]) if len(parts) >= 2 and parts[-2].isdigit() else 0


def journal_bytes(root: Path) -> int:
    """Bytes the journals under ``root`` hold now (what the rows in flight cost on disk)."""
    folder = root / JOURNAL_DIR
    return sum(p.stat().st_size for p in folder.glob("*.jsonl")) if folder.is_dir() else 0


def journal_rows(root: Path) -> int:
    """Rows the journals under ``root`` still hold (rollouts not in a run yet, or never to be: a
    delivery again, an earlier attempt's)."""
    folder = root / JOURNAL_DIR
    return sum(p.read_bytes().count(b"\n") for p in folder.glob("*.jsonl")) if folder.is_dir() else 0
