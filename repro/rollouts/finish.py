"""The end of an RL job: the rollouts its reward workers journaled but never flushed go into their runs.

Why: a reward worker flushes a step's buffer ``max_wait_s`` after its first row (or when
``chunk`` rows are in), and its last buffer on ``close``, an ``atexit`` hook. When the trainer's
driver exits, Ray kills the reward workers, and a killed process runs no ``atexit`` hook: the
rows scored in the job's last seconds stay in the worker's journal (:mod:`repro.rollouts.journal`),
and the last step's run stays ``running`` with a few rows short (the nano CI slice once stored 29
of a step's 32 rollouts this way). The journal's rule is that the next writer replays a dead
one's rows; at the end of a job there is none, so the command that ran the job is that writer:
:func:`finish_rollout_runs` waits until no writer holds its lock (a killed worker's process can
outlive the driver by a moment), then replays every dead journal with the options its writer
recorded, exactly once (the runs' ledgers key each rollout by (uid, session)).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from repro.rollouts.journal import JOURNAL_DIR, OPTIONS_SUFFIX, live_writers
from repro.rollouts.runs import RolloutRunsOptions, RolloutRunWriter, options_from_json

#: How long the replay waits for the job's writers to let go of their locks before it replays
#: what is dead and leaves the rest (a reward worker that outlives its job by this long is hung).
WAIT_FOR_WRITERS_S = 120.0
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Finished:
    """What the replay did: rollouts stored from dead journals, and writers still alive after the wait."""

    replayed: int
    still_alive: tuple[str, ...] = ()

    def line(self, root: Path) -> str:
        text = (f"rollout runs: {self.replayed} rollout(s) the reward workers left in their journals stored in "
                f"{root}" if self.replayed else f"rollout runs: every rollout was in its run ({root})")
        if self.still_alive:
            text += (f"; {len(self.still_alive)} writer(s) still hold their journal ({', '.join(self.still_alive)}): "
                     "their rows are stored by the next writer under this folder")
        return text


def recorded_options(root: Path) -> RolloutRunsOptions | None:
    """The options the newest writer under ``root`` recorded beside its journal, if any did."""
    folder = root / JOURNAL_DIR
    found = sorted(folder.glob(f"*{OPTIONS_SUFFIX}"), key=lambda p: p.stat().st_mtime) if folder.is_dir() else []
    for path in reversed(found):
        try:
            return options_from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            log.warning("rollout runs: %s is not a writer's options; skipped", path)
    return None


def finish_rollout_runs(root: Path, fallback: Callable[[], RolloutRunsOptions | None] | None = None,
                        wait_s: float = WAIT_FOR_WRITERS_S, poll_s: float = 0.25) -> Finished:
    """Store the rows the job's dead writers left under ``root`` (module docstring). ``fallback``: gives
    the options to replay with when no writer recorded its own (a journal from before they were
    recorded); called only then (the stage config's options read the validation files)."""
    if not (root / JOURNAL_DIR).is_dir():
        return Finished(0)
    deadline = time.monotonic() + wait_s
    while live_writers(root) and time.monotonic() < deadline:
        time.sleep(poll_s)
    options = recorded_options(root) or (fallback() if fallback is not None else None)
    if options is None:
        if any((root / JOURNAL_DIR).glob("*.jsonl")):
            log.warning("rollout runs: journals under %s hold rows but no writer recorded its options; they are "
                        "stored by the next writer", root)
        return Finished(0, tuple(live_writers(root)))
    # the folder as this machine sees it (a writer on another node may have mounted it elsewhere)
    finisher = RolloutRunWriter(replace(options, root=root), attempt="finish", background=False)  # replays the dead as it starts
    replayed = finisher.recovered
    finisher.close()
    return Finished(replayed, tuple(live_writers(root)))
