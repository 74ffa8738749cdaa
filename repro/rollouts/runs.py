"""repro's rollout writer: every scored rollout of an RL job lands in a pr1-eval run per step.

Layout: the same as ``pr1-eval import-verl``'s, so every reader takes both: ``DIR/train/step-N``
for the training rollouts of step N, ``DIR/val/step-N`` for the validation run at step N, each a
run store (``run.json`` + durable parquet parts) whose ``RunRecord.training`` says ``job``,
``kind`` ('train' | 'validation'), ``step``, ``format`` 'repro', ``tags_kept`` True, ``attempt``,
``expected_rows``, ``rows_seen``, ``rows_stored``, ``every`` and, once complete, ``summary``
(:func:`pr1_eval.report.step_summary.step_summary`).

Many writers, one run. VERL 0.9.1 scores rollouts one at a time in ``reward.num_workers``
processes, so no process sees a step whole. Each process journals every rollout it is handed
(:mod:`repro.rollouts.journal`: on disk when ``add`` returns, so a killed worker loses nothing),
buffers it, and flushes a step's buffer (when it holds ``chunk`` rows, or ``max_wait_s`` after its
first row) under one exclusive ``flock`` on ``DIR/.rollout-runs.lock``, which keeps the run store's
one-writer rule among them; each flush also holds the step run's own writer lock
(:mod:`pr1_eval.store.run_lock`), which every pr1-eval command that writes a run takes, so no
other command writes the step meanwhile (``regrade`` refuses a step until it is complete). Under the lock a ledger in the run folder (``rollouts-seen.json``) holds every
rollout seen, stored or not, by (uid, session), and the parts whose rows it accounts for: a
rollout delivered twice, or replayed from a dead worker's journal, is stored once, and a part a
writer wrote but died before recording is removed (its rows come back from that journal). Every
writer replays the journals of dead writers (under the lock) when it starts and before each
flush. The run is marked ``complete`` when the ledger holds the step's every rollout (training:
``data.train_batch_size`` × ``rollout.n``; validation: the rows VERL's own validation dataset keeps
after its overlong-prompt filter × their ``__rollout_n__``, :func:`validated_size`). Then its
parts are compacted into one and its summary computed. Until then ``status`` is ``running``.

Dynamic sampling (``algorithm.filter_groups``, DAPO) is refused when the config is read
(:func:`refuse_dynamic_sampling` says why): the trainer decides which scored groups a step keeps
after the reward has scored them, out of the reward workers' sight.

Volume: ``every`` = n keeps about one training group in n, chosen by problem (a stable hash of
task and problem id, so a kept problem is kept at every step it is drawn), and every validation
rollout. Attempts: the job's Ray job id; a step written by an earlier attempt of the job (a
resumed job redoing the steps after its checkpoint) is moved to ``DIR.superseded/`` and written
again, so a step's run is always one attempt's, never two mixed; an earlier attempt's journal
only joins a run of its own attempt.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import ray

from pr1_eval.errors import Pr1EvalError
from pr1_eval.ingest.training_layout import step_record, step_run_dir, supersede, with_samples
from pr1_eval.records.provenance import now_iso
from pr1_eval.records.run import RunRecord
from pr1_eval.records.sample import SampleRecord
from pr1_eval.records.training import TrainingSection
from pr1_eval.store.run_lock import run_lock
from pr1_eval.store.run_store import RunStore, write_json_atomic
from repro.data import ROLLOUT_N_KEY
from repro.rollouts.journal import Journal, dead_journals
from repro.rollouts.records import Rollout

FORMAT = "repro"
LEDGER = "rollouts-seen.json"
LOCK = ".rollout-runs.lock"
#: How long a flush waits for another command that holds a step run's writer lock (a ``regrade`` of
#: a complete step, say) before it fails: the rollout writers' own turns are kept by ``LOCK``.
WAIT_FOR_OTHER_WRITER_S = 300.0
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RolloutRunsOptions:
    """Where and how much to write (the stage config's ``repro.rollout_runs`` and the trainer's sizes)."""

    root: Path
    job: str
    train_rows: int  # rollouts of one training step
    train_n: int  # rollouts per prompt in training
    val_rows: int | None  # rollouts of one validation (None: unknown, validation runs stay 'running')
    val_n: int  # the most rollouts one validation prompt gets
    every: int = 1
    chunk: int = 256
    max_wait_s: float = 2.0
    response_budget: int | None = None
    reward_mode: str | None = None  # the stage's reward mode (reward_kwargs.mode), recorded per step
    switch_step: int | None = None  # mid_training: the step after which the reward is accuracy only


def validation_size(files: Any, default_n: int) -> tuple[int | None, int]:
    """(rollouts of one validation, most per prompt) from the validation parquet files: each row's
    ``__rollout_n__`` (what VERL's V1 trainer honours), else ``val_kwargs.n``; (None, n) when unreadable."""
    paths = [files] if isinstance(files, str) else list(files or [])
    total, most = 0, default_n
    try:
        for path in paths:
            columns = [c for c in [ROLLOUT_N_KEY] if c in pq.read_schema(str(path)).names]
            table = pq.read_table(str(path), columns=columns)
            given = table.column(0).to_pylist() if columns else [None] * table.num_rows
            counts = [default_n if c is None else int(c) for c in given]
            total += sum(counts)
            most = max([most, *counts])
    except (OSError, ValueError) as exc:
        log.warning("rollout runs: cannot read the validation files %s (%s); validation runs stay 'running'", paths, exc)
        return None, most
    return (total or None), most


def validated_size(config: Any, tokenizer: Any, default_n: int) -> tuple[int | None, int]:
    """(rollouts of one validation, most per prompt) counted on the dataset VERL's trainer validates:
    VERL 0.9.1's own ``create_rl_dataset`` on ``data.val_files`` with the trainer's arguments
    (``is_train=False``, ``max_samples=data.val_max_samples``), so its ``filter_overlong_prompts``
    (the chat-templated prompt longer than ``data.max_prompt_length`` tokens is dropped, and so is
    a row it cannot template), ``val_max_samples`` and ``data.custom_cls`` are VERL's, not a copy
    that could drift. The validation loader keeps every row (``drop_last=False``), so each kept row
    is validated with its ``__rollout_n__`` (else ``val_kwargs.n``) rollouts. Text models only: the
    trainer passes a multimodal processor, this count does not (repro trains Qwen3-Base).
    Falls back to the files' rows (:func:`validation_size`) when the dataset cannot be built."""
    from verl.trainer.ppo.utils import create_rl_dataset

    files = config.data.get("val_files")
    try:
        dataset = create_rl_dataset(files, config.data, tokenizer, None, is_train=False,
                                    max_samples=int(config.data.get("val_max_samples", -1) or -1))
        frame = dataset.dataframe
        given = frame[ROLLOUT_N_KEY] if ROLLOUT_N_KEY in frame.column_names else [None] * len(frame)
    except Exception as exc:  # the trainer reports its own failure to load; here the count is only a hint
        log.warning("rollout runs: cannot build the validation dataset from %s (%s); counting the files' rows "
                    "(a validation whose prompts VERL drops then stays 'running')", files, exc)
        return validation_size(files, default_n)
    counts = [default_n if c is None else int(c) for c in given]
    return (sum(counts) or None), max([default_n, *counts])


def refuse_dynamic_sampling(config: Any) -> None:
    """Dynamic sampling (DAPO's ``algorithm.filter_groups``) is refused: in VERL 0.9.1's V1 trainer
    the replay buffer (``ReplayBufferSync.sample``, in the trainer process) decides which scored
    groups a step trains on *after* the reward workers scored them: it evicts the groups whose
    metric is the same across their rollouts, refills with fresh prompts (2k for k evicted) and,
    once enough groups are left, discards the surplus. The reward workers see every scored rollout
    and none of those decisions, so they can neither tell a step's rows from discarded ones nor
    know how many rollouts a step will score (when it is complete). Supporting it would take a
    sampler subclass that writes the kept uids per step, and repro's stages (GRPO, as the paper)
    never turn it on."""
    section = (config.get("algorithm", {}) or {}).get("filter_groups", None) or {}
    if bool(section.get("enable", False)):
        raise Pr1EvalError(
            "repro.rollout_runs cannot record a job with dynamic sampling (algorithm.filter_groups.enable=true): "
            "VERL's trainer picks the groups a step keeps after the reward has scored them, so the rollout runs "
            "could not tell a step's rollouts from discarded ones nor when a step is complete. Set "
            "algorithm.filter_groups.enable=false, or turn the rollout runs off (pr1-repro run --no-rollout-runs, "
            "i.e. repro.rollout_runs.dir=null) and read the job's own dumps with `pr1-eval import-verl`")


def options_from_config(config: Any, tokenizer: Any = None) -> RolloutRunsOptions | None:
    """The options a stage config asks for, or None when ``repro.rollout_runs.dir`` is null (off).
    With ``tokenizer`` (the reward manager's), the validation size is what VERL will validate
    (:func:`validated_size`); without, the validation files' rows (:func:`validation_size`)."""
    section = dict((config.get("repro", {}) or {}).get("rollout_runs", {}) or {})
    if not section.get("dir"):
        return None
    refuse_dynamic_sampling(config)
    rollout = config.actor_rollout_ref.rollout
    val_n = int(rollout.val_kwargs.get("n", 1) or 1)
    val_rows: int | None
    if section.get("val_rows"):
        val_rows, val_most = int(section["val_rows"]), val_n
    elif tokenizer is not None and config.data.get("val_files"):
        val_rows, val_most = validated_size(config, tokenizer, val_n)
    else:
        val_rows, val_most = validation_size(config.data.get("val_files"), val_n)
    reward = dict(((config.get("reward", {}) or {}).get("custom_reward_function", {}) or {}).get("reward_kwargs", {})
                  or {})
    mode = reward.get("mode")
    return RolloutRunsOptions(
        root=Path(str(section["dir"])).expanduser().resolve(), job=str(config.trainer.get("experiment_name") or "job"),
        train_rows=int(config.data.train_batch_size) * int(rollout.n), train_n=int(rollout.n), val_rows=val_rows,
        val_n=val_most, every=max(1, int(section.get("every", 1) or 1)), chunk=int(section.get("chunk", 256) or 256),
        max_wait_s=float(section.get("max_wait_s", 2.0) or 2.0),
        response_budget=int(rollout.get("response_length") or config.data.get("max_response_length") or 0) or None,
        reward_mode=None if mode is None else str(mode),
        switch_step=int(reward["switch_step"]) if mode == "mid_training" and reward.get("switch_step") is not None
        else None,
    )


def options_to_json(options: RolloutRunsOptions) -> dict[str, Any]:
    """The options as JSON (recorded beside a writer's journal, :mod:`repro.rollouts.journal`)."""
    return {**asdict(options), "root": str(options.root)}


def options_from_json(data: dict[str, Any]) -> RolloutRunsOptions:
    """:func:`options_to_json` read back; a key this version does not know is ignored (a newer writer's)."""
    known = {f.name for f in fields(RolloutRunsOptions)}
    return RolloutRunsOptions(**{**{k: v for k, v in data.items() if k in known}, "root": Path(data["root"])})


def job_attempt() -> str:
    """This attempt of the job: the Ray job id (shared by every worker of one job), else the
    ``PR1_ROLLOUT_ATTEMPT`` environment variable, else 'local'."""
    if ray.is_initialized():
        return str(ray.get_runtime_context().get_job_id())
    return os.environ.get("PR1_ROLLOUT_ATTEMPT", "local")


def kept(record: SampleRecord, every: int) -> bool:
    """About one problem in ``every``, by a hash of task and problem id that every process agrees on."""
    digest = hashlib.sha256(f"{record.task}\t{record.problem_id}".encode()).digest()
    return every <= 1 or int.from_bytes(digest[:8], "big") % every == 0


class RolloutRunWriter:
    """Buffers rollouts and flushes them into their step's run (module docstring). Thread-safe:
    ``add`` is called on the reward loop, flushing happens on a background thread."""

    def __init__(self, options: RolloutRunsOptions, attempt: str | None = None, background: bool = True) -> None:
        self.options = options
        self.attempt = attempt or job_attempt()
        self._buffers: dict[tuple[str, int], list[Rollout]] = {}
        self._since: dict[tuple[str, int], float] = {}
        self._mutex = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        options.root.mkdir(parents=True, exist_ok=True)
        self._journal: Journal | None = Journal(options.root)
        self._journal.record_options(options_to_json(options))
        self._journal_failed = False
        # a worker that died before this one started may have left rows in its journal
        self.recovered = self.recover()
        self._thread = threading.Thread(target=self._loop, name="rollout-runs", daemon=True) if background else None
        if self._thread is not None:
            self._thread.start()
        atexit.register(self.close)

    # ----- the buffer ------------------------------------------------------------------------
    def add(self, rollout: Rollout) -> None:
        """Journal the rollout (on disk when this returns, repro.rollouts.journal) and buffer it."""
        key = (rollout.kind, rollout.step)
        with self._mutex:
            self._journal_row(rollout)
            self._buffers.setdefault(key, []).append(rollout)
            self._since.setdefault(key, time.monotonic())
            full = len(self._buffers[key]) >= self.options.chunk
        if full:
            self._wake.set()

    def _journal_row(self, rollout: Rollout) -> None:
        if self._journal is None:
            return
        try:
            self._journal.append(rollout, self.attempt)
        except OSError:  # a full disk must not stop the job: the row is still buffered, said once
            if not self._journal_failed:
                log.exception("rollout runs: cannot journal rollouts under %s; rows buffered in memory are lost "
                              "if this worker dies", self.options.root)
            self._journal_failed = True

    def _due(self, force: bool) -> list[tuple[tuple[str, int], list[Rollout], Path | None]]:
        now = time.monotonic()
        with self._mutex:
            keys = [k for k, rows in self._buffers.items() if force or len(rows) >= self.options.chunk
                    or now - self._since[k] >= self.options.max_wait_s]
            for key in keys:
                del self._since[key]
            return [(key, self._buffers.pop(key), self._seal(key)) for key in keys]

    def _seal(self, key: tuple[str, int]) -> Path | None:
        try:
            return None if self._journal is None else self._journal.seal(key)
        except OSError:
            log.exception("rollout runs: cannot seal the journal of %s step %d", *key)
            return None

    def flush(self, force: bool = True) -> None:
        """Write every buffered rollout (``force``) or the buffers that are due; a chunk's journal
        segment goes once its rows are in the run (a failed chunk's stays, for the next writer)."""
        for (kind, step), rows, segment in self._due(force):
            try:
                self._write(kind, step, rows)
            except Exception:  # a lost chunk must not stop the training job; it is logged loudly
                log.exception("rollout runs: could not write %d rollouts of %s step %d to %s (kept in %s for "
                              "the next writer)", len(rows), kind, step, self.options.root, segment)
                continue
            if segment is not None:
                segment.unlink(missing_ok=True)

    def _loop(self) -> None:
        while not self._closed:
            self._wake.wait(timeout=min(1.0, self.options.max_wait_s))
            self._wake.clear()
            with self._mutex:
                self._sync_journal()
            self.flush(force=False)

    def _sync_journal(self) -> None:
        try:
            if self._journal is not None:
                self._journal.sync()
        except OSError:
            log.exception("rollout runs: cannot fsync the journal under %s", self.options.root)

    def close(self) -> None:
        """Flush everything, stop the background thread, and close the journal."""
        self._closed = True
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        self.flush(force=True)
        with self._mutex:
            if self._journal is not None:
                self._journal.close()
                self._journal = None

    def recover(self) -> int:
        """Write the rows dead writers left in their journals (each once); returns how many were read."""
        with self._locked():
            return self._recover_locked()

    # ----- one step's run, under the lock ----------------------------------------------------
    def run_dir(self, kind: str, step: int) -> Path:
        return step_run_dir(self.options.root, kind, step)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.options.root / LOCK, "a+") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _recover_locked(self) -> int:
        own = None if self._journal is None else self._journal.token
        read = 0
        for dead in dead_journals(self.options.root, own):
            groups: dict[tuple[str, str, int], list[Rollout]] = {}
            for attempt, row in dead.rows():
                groups.setdefault((attempt, row.kind, row.step), []).append(row)
            for (attempt, kind, step), rows in sorted(groups.items(), key=lambda item: (item[0][1], item[0][2])):
                self._write_locked(kind, step, rows, attempt, replay=True)
                read += len(rows)
            log.info("rollout runs: replayed %d rollouts of the dead writer %s", sum(map(len, groups.values())),
                     dead.token)
            dead.remove()
        return read

    def _write(self, kind: str, step: int, rows: list[Rollout]) -> None:
        with self._locked():
            self._recover_locked()
            self._write_locked(kind, step, rows, self.attempt, replay=False)

    def _write_locked(self, kind: str, step: int, rows: list[Rollout], attempt: str, replay: bool) -> None:
        """Store ``rows`` of one step (those not in its ledger yet); complete the step when all are in.
        A replayed journal's rows join their own attempt's run only: they never move a later one aside."""
        out = self.run_dir(kind, step)
        with run_lock(out, "pr1-repro rollout writer", wait_s=WAIT_FOR_OTHER_WRITER_S):
            self._write_run_locked(out, kind, step, rows, attempt, replay)

    def _write_run_locked(self, out: Path, kind: str, step: int, rows: list[Rollout], attempt: str,
                          replay: bool) -> None:
        store = RunStore(out)
        record = store.read_run() if store.exists() else None
        training = record.training if record is not None else None
        if record is not None and (training is None or training.format != FORMAT):
            raise RuntimeError(f"{out} holds a run that is not repro's rollouts; pass another rollout_runs.dir")
        if record is not None and training is not None and training.attempt != attempt:
            if replay:
                log.info("rollout runs: %d journal rows of attempt %s for %s are not this run's attempt; dropped",
                         len(rows), attempt, out)
                return
            supersede(out, self.options.root, kind)  # an earlier attempt's step: this attempt redoes it
            record, training = None, None
        if record is not None and record.status == "complete":
            return  # every rollout of the step is in: these are deliveries again
        ledger = _read_ledger(out, stored=int(training.rows_stored or 0) if training is not None else 0)
        _drop_uncommitted_parts(store, ledger)
        fresh = self._admit(kind, rows, ledger)
        part = store.append(fresh)
        if part is not None and ledger["parts"] is not None:
            ledger["parts"].append(part.name)
        ledger["stored"] += len(fresh)
        seen = sum(len(v) for v in ledger["seen"].values())
        record = record or self._new_record(kind, step, attempt)
        assert record.training is not None  # a repro step run (checked above, or just made)
        record = replace(record, training=replace(record.training, rows_seen=seen, rows_stored=ledger["stored"]))
        expected = record.training.expected_rows if record.training else None
        done = expected is not None and seen >= int(expected)
        ledger["compacting"] = bool(ledger.get("compacting") or done)
        write_json_atomic(out / LEDGER, ledger)  # the rows are the run's from here on (their journal may go)
        if done:
            record = self._complete(store, record)
        store.write_run(record)

    def _admit(self, kind: str, rows: list[Rollout], ledger: dict[str, Any]) -> list[SampleRecord]:
        """The rollouts not seen before, with their sample index (``rollout n`` × group ordinal +
        session: a problem drawn twice in a step keeps both groups); the ledger updated."""
        stride = self.options.train_n if kind == "train" else self.options.val_n
        fresh = []
        for row in rows:
            sessions = ledger["seen"].setdefault(row.uid, [])
            session = len(sessions) if row.session is None else row.session
            if session in sessions:
                continue
            sessions.append(session)
            if kind == "train" and not kept(row.record, self.options.every):
                continue
            owners = ledger["groups"].setdefault(f"{row.record.task}\t{row.record.problem_id}", [])
            if row.uid not in owners:
                owners.append(row.uid)
            fresh.append(replace(row.record, sample_idx=owners.index(row.uid) * stride + session))
        return fresh

    def _new_record(self, kind: str, step: int, attempt: str) -> RunRecord:
        o = self.options
        expected = o.train_rows if kind == "train" else o.val_rows
        training = TrainingSection(job=o.job, kind=kind, step=step, format=FORMAT, tags_kept=True,
                                   structure_measurable=True, attempt=attempt, expected_rows=expected,
                                   rows_seen=0, rows_stored=0, every=o.every if kind == "train" else 1,
                                   # what the Training page marks as the curriculum's switch (analysis.runs.steps)
                                   reward_mode=o.reward_mode or None, switch_step=o.switch_step)
        return step_record(training, status="running", engine={"backend": "verl", "source": "repro-rollouts"},
                           decoding={"mode": "rl-rollout", "tags_kept": True})

    def _complete(self, store: RunStore, record: RunRecord) -> RunRecord:
        """Compact the step's parts into one, and declare its tasks and its summary."""
        records = store.read_records()
        store.rewrite(records)
        record = with_samples(record, records, lambda task: (None, "repro-rollouts"))
        return replace(record, status="complete", finished_at=now_iso())


def _read_ledger(out: Path, stored: int = 0) -> dict[str, Any]:
    """The step's ledger: ``seen`` (uid -> sessions), ``groups`` (problem -> uids, for sample
    indices), ``parts`` (the parts whose rows it accounts for; None in a ledger that predates the
    list), ``stored`` and ``compacting`` (the step is complete and its parts are being compacted)."""
    path = out / LEDGER
    if not path.is_file():
        return {"seen": {}, "groups": {}, "parts": [], "stored": 0, "compacting": False}
    data = json.loads(path.read_text(encoding="utf-8"))
    parts = data.get("parts")
    return {"seen": dict(data.get("seen") or {}), "groups": dict(data.get("groups") or {}),
            "parts": None if parts is None else list(parts), "stored": int(data.get("stored", stored) or 0),
            "compacting": bool(data.get("compacting"))}


def _drop_uncommitted_parts(store: RunStore, ledger: dict[str, Any]) -> None:
    """Delete the parts a writer killed between writing a part and its ledger left: their rows are
    not in the ledger, so they come again (from that writer's journal) and would be stored twice."""
    if ledger["parts"] is None or ledger["compacting"]:
        return
    committed = set(ledger["parts"])
    for part in store.part_paths():
        if part.name not in committed:
            log.warning("rollout runs: %s was written by a writer that died before recording it; removed (its "
                        "rows are written again from that writer's journal)", part)
            part.unlink()
    for stray in store.samples_dir.glob(".part-*.parquet.tmp") if store.samples_dir.is_dir() else []:
        stray.unlink(missing_ok=True)
