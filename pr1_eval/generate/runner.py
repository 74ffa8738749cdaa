"""``pr1-eval run``: generate k samples per problem, parse, grade, and store them in chunks.

Work is done a chunk of problems at a time: all their k samples in one decoding call, then
structure parsing, pooled grading and a durable append, which run on a grader thread while the
engine generates the next chunk (the GPU does not wait for math-verify). A rerun of the same command reads the finished keys and generates only what is
missing; a rerun with different settings into the same folder is refused, since mixing two
configurations in one run would make its metrics meaningless.

The chunks come from this process's engine, or, with ``--ray``, from replicas on a Ray cluster
(:mod:`pr1_eval.scaleout.ray_pool`) that pull chunks from a queue; either way this process is
the only writer of the run store, holding its writer lock (:mod:`pr1_eval.store.run_lock`) from
before the model loads to the end, so a second ``run`` into the folder is refused at once. ``--shard i/n`` keeps every n-th problem from i (job arrays;
``pr1-eval merge`` joins the shards). Progress (a bar on a terminal, log lines elsewhere):
:mod:`pr1_eval.generate.progress`.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from pr1_eval.decoding.base import DecodedSample
from pr1_eval.engines.base import Engine, SamplingConfig
from pr1_eval.engines.factory import make_engine
from pr1_eval.errors import Pr1EvalError
from pr1_eval.generate.adaptive import Draw, adaptive_rounds
from pr1_eval.generate.config import RunConfig
from pr1_eval.generate.plan import PlannedTask, RunPlan, build_plan
from pr1_eval.generate.preflight import check_output
from pr1_eval.generate.progress import RunProgress
from pr1_eval.generate.wall_clock import WaveLog
from pr1_eval.grading.annotate import annotate_grades, annotate_structure, position_unit, token_offsets
from pr1_eval.inputs.prompts import PromptTemplate, apply_chat, prompt_hash
from pr1_eval.inputs.tasks import LoadedTask, Problem
from pr1_eval.records.answer_policy import default_policy
from pr1_eval.records.provenance import now_iso
from pr1_eval.records.sample import SampleRecord
from pr1_eval.scaleout.queue import Chunk, engine_chunk_size, plan_chunks
from pr1_eval.store.run_lock import run_lock
from pr1_eval.store.run_store import RunStore

__all__ = ["ChunkSource", "LocalChunks", "PreparedTask", "RunConfig", "execute", "run_eval"]


@dataclass
class PreparedTask:
    """A planned task with its prompts rendered by the model's chat template, as text and token ids."""

    loaded: LoadedTask
    prompts: list[str]
    prompt_ids: list[list[int]]
    task_size: int = 0  # problems of the task before --shard kept a slice of them


def render_prompts(tasks: Mapping[str, PlannedTask], template: PromptTemplate,
                   tokenizer: Any) -> dict[str, PreparedTask]:
    """Execution's first step: every problem's prompt, once the tokenizer is known."""
    prepared = {}
    for name, task in tasks.items():
        prompts = [apply_chat(tokenizer, template.render(p.problem)) for p in task.loaded.problems]
        ids = [list(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in prompts]
        prepared[name] = PreparedTask(task.loaded, prompts, ids, task.task_size)
    return prepared


def _record_finish(reason: str) -> str:
    """A decoder's finish reason as stored: EOS and stop tokens are ``stop``; ``length``, the
    engine's ``abort``/``error`` (a partial response) and ``block_limit`` (the paper's rollout ended
    the response after its last allowed block) stay distinct, so a report can tell them apart."""
    return reason if reason in ("length", "abort", "error", "block_limit") else "stop"


def _make_record(task: PreparedTask, index: int, sample_idx: int, decoded: DecodedSample, tokenizer: Any) -> SampleRecord:
    problem: Problem = task.loaded.problems[index]
    record = SampleRecord(
        task=problem.task, problem_id=problem.problem_id, sample_idx=sample_idx, task_version=task.loaded.spec.version,
        prompt_hash=prompt_hash(task.prompts[index]), problem=problem.problem, response=decoded.text,
        finish_reason=_record_finish(decoded.finish_reason),
        n_prompt_tokens=len(task.prompt_ids[index]), n_response_tokens=len(decoded.token_ids),
        engine_calls=decoded.engine_calls, critical_path_tokens=decoded.critical_path_tokens,
        engine_inserted_tokens=decoded.engine_inserted_tokens, gold=problem.gold, wall_s=decoded.wall_s,
    )
    return annotate_structure(record, token_offsets(tokenizer, decoded.text))


def _missing(task: PreparedTask | PlannedTask, k: int, finished: set[tuple[str, str, int]]) -> list[tuple[int, list[int]]]:
    """(problem index, missing sample indices) for every problem not yet complete."""
    out = []
    for i, problem in enumerate(task.loaded.problems):
        missing = [s for s in range(k) if (problem.task, problem.problem_id, s) not in finished]
        if missing:
            out.append((i, missing))
    return out


def resume_line(out: Path, planned: dict[str, int], left: dict[str, int]) -> str | None:
    """``resuming runs/x: 128 of 560 samples already done (1 of 2 tasks finished), 432 left`` when the
    run folder already held some of the planned samples; None for a fresh run. Why: a resumed run
    used to start its progress line at ``0/432`` with no word that 128 were kept, so it read as a
    new, smaller run (the progress line counts and times what is left; this says what was found)."""
    total, todo = sum(planned.values()), sum(left.values())
    if todo >= total:
        return None
    finished = sum(1 for name in planned if not left.get(name))
    return (f"resuming {out}: {total - todo} of {total} samples already done ({finished} of {len(planned)} "
            f"task(s) finished), {todo} left" + ("; nothing to generate" if not todo else ""))


def _grade_and_store(records: list[SampleRecord], config: RunConfig, store: RunStore, bar: RunProgress) -> None:
    annotate_grades(records, workers=config.grade_workers, timeout_s=config.grade_timeout_s,
                    policy=config.answer_policy or default_policy(config.prompt))
    store.append(records)
    bar.on_stored(len(records))


Payload = Callable[[Chunk], tuple[list[list[int]], list[str]]]


class ChunkSource(Protocol):
    """Where decoded chunks come from: this process's engine, or a Ray pool of replicas."""

    @property
    def tokenizer(self) -> Any: ...
    @property
    def waiting_limit(self) -> int: ...
    def describe(self) -> dict[str, Any]: ...
    def plan(self, todo: dict[str, list[tuple[int, list[int]]]], requested: int | None) -> list[Chunk]: ...
    def watch(self, bar: Any) -> None: ...
    def results(self, chunks: Sequence[Chunk], payload: Payload, k: int,
                sampling: SamplingConfig) -> Iterator[tuple[Chunk, Any]]: ...
    def summary(self) -> dict[str, Any]: ...
    def close(self) -> None: ...


class _CallCounter:
    """The engine as the decoder sees it: every ``generate`` call that returns is reported to the
    progress display (a batch, a fork-join wave), so work inside a long chunk is visible. Every
    other attribute is the engine's own."""

    def __init__(self, engine: Engine, on_call: Callable[[], None]) -> None:
        self._engine, self._on_call = engine, on_call

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def generate(self, requests: Any, sampling: SamplingConfig) -> Any:
        out = self._engine.generate(requests, sampling)
        self._on_call()
        return out


class LocalChunks:
    """Chunks generated by this process's engine, one after another, in order."""

    waiting_limit = 1  # one chunk grades while the engine generates the next

    def __init__(self, engine: Engine, decoder: Any) -> None:
        self.engine, self.decoder = engine, decoder
        self.tokenizer = engine.tokenizer
        self._watched: Engine = engine
        self._waves = WaveLog(str(getattr(decoder, "name", "unknown")))

    def describe(self) -> dict[str, Any]:
        return self.engine.describe()

    def plan(self, todo: dict[str, list[tuple[int, list[int]]]], requested: int | None) -> list[Chunk]:
        return plan_chunks(todo, requested or engine_chunk_size(self.engine.name))

    def watch(self, bar: Any) -> None:
        """Report each engine call, and each token step where the engine can tell (HF ``generate``,
        the structured decoder), or each finished completion inside a call (vLLM), to the progress
        display."""
        self._watched = cast(Engine, _CallCounter(self.engine, bar.on_engine_call))
        if hasattr(self.engine, "on_decoding_step"):
            self.engine.on_decoding_step = bar.on_decoding_step
        if hasattr(self.engine, "on_call_progress"):
            self.engine.on_call_progress = bar.on_call_progress
        if hasattr(self.decoder, "on_activity"):  # fork-join: which wave runs, for how many samples
            self.decoder.on_activity = bar.set_activity

    def results(self, chunks: Sequence[Chunk], payload: Payload, k: int, sampling: SamplingConfig) -> Iterator[tuple[Chunk, Any]]:
        for chunk in chunks:
            contexts, request_ids = payload(chunk)
            decoded = self.decoder.decode(self._watched, contexts, k, sampling, request_ids)
            self._waves.add(getattr(self.decoder, "waves", ()), sum(map(len, decoded)))
            yield chunk, decoded

    def summary(self) -> dict[str, Any]:
        """run.json's ``generation`` section (:mod:`pr1_eval.generate.wall_clock`), when a chunk was decoded."""
        section = self._waves.section()
        return {} if section is None else {"generation": section}

    def close(self) -> None:
        """The caller's engine stays open (a sweep may reuse it), no longer reporting to this run."""
        if hasattr(self.engine, "on_decoding_step"):
            self.engine.on_decoding_step = None
        if hasattr(self.engine, "on_call_progress"):
            self.engine.on_call_progress = None
        if hasattr(self.decoder, "on_activity"):
            self.decoder.on_activity = None


def _payload(prepared: dict[str, PreparedTask], suffix: str = "") -> Payload:
    """A chunk's prompt ids and request ids (the ids seed each request: same id, same seed; an
    adaptive run's rounds add ``suffix``, so each round draws new samples)."""
    def build(chunk: Chunk) -> tuple[list[list[int]], list[str]]:
        task = prepared[chunk.task]
        return ([task.prompt_ids[i] for i, _ in chunk.items],
                [f"{task.loaded.spec.name}/{task.loaded.problems[i].problem_id}{suffix}" for i, _ in chunk.items])
    return build


def _generate(config: RunConfig, source: ChunkSource, prepared: dict[str, PreparedTask], chunks: Sequence[Chunk],
              store: RunStore, bar: RunProgress, draw: Draw | None = None) -> None:
    """Turn every chunk the source yields into records, graded and stored on a grader thread while
    the next chunks generate. At most ``source.waiting_limit`` chunks wait for the grader, so memory
    stays bounded: one behind a single engine; more behind a pool, whose driver must keep handing
    out work while the grader catches up."""
    draw = draw or Draw(config.k)
    waiting: deque[Future[None]] = deque()
    inline = _grades_inline(config)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pr1-grade") as grader:
        for chunk, decoded in source.results(chunks, _payload(prepared, draw.suffix), draw.count, config.sampling()):
            task = prepared[chunk.task]
            records = [_make_record(task, i, s, decoded[j][s - draw.offset], source.tokenizer)
                       for j, (i, missing) in enumerate(chunk.items) for s in missing]
            bar.on_generated(len(records))
            if inline:
                _grade_and_store(records, config, store, bar)
                continue
            while len(waiting) >= source.waiting_limit:
                waiting.popleft().result()
            waiting.append(grader.submit(_grade_and_store, records, config, store, bar))
        while waiting:
            waiting.popleft().result()


def _grades_inline(config: RunConfig) -> bool:
    """Whether ``--grade-workers 0`` grades each chunk here, between chunks, instead of on the grader
    thread: grading in this process times each check with a signal, which works on the main thread
    only (on the grader thread it failed after every sample was generated, and nothing was stored).
    Refused before any generation when this is not the main thread (a run started from a thread)."""
    if config.grade_workers != 0:
        return False
    if threading.current_thread() is not threading.main_thread():
        raise Pr1EvalError("--grade-workers 0 grades in this process, which needs the main thread; pass "
                           "--grade-workers 1 or more")
    return True


def _open_source(plan: RunPlan, engine: Engine | None) -> ChunkSource:
    """This process's engine, or (``--ray``) a pool of replicas once one of them is ready."""
    config = plan.config
    if config.ray is None:
        return LocalChunks(engine or make_engine(config.engine, config.model, **config.engine_options),
                           plan.decoding.decoder())
    try:
        from pr1_eval.scaleout.ray_pool import RayPool, ReplicaSpec
    except ModuleNotFoundError as exc:
        if exc.name != "ray":
            raise
        raise Pr1EvalError("--ray needs Ray, which is not installed here; install it with pip install 'pr1-eval[ray]' "
                           "(the same version as the cluster's)") from None
    spec = ReplicaSpec(config.model, config.engine, dict(config.engine_options), plan.decoding)
    return RayPool.start(spec, config.ray, config.replicas, config.gpus_per_replica)


def run_eval(config: RunConfig, engine: Engine | None = None) -> Path:
    """Plan, then run (or resume) an evaluation; returns the run directory."""
    return execute(build_plan(config, engine), engine)


def execute(plan: RunPlan, engine: Engine | None = None) -> Path:
    """Generate, grade and store what the plan's run still lacks; returns the run directory.

    ``engine``: a loaded engine to use (it stays open: a sweep frees it itself); without one the
    plan's engine is built here, or its Ray replicas started.
    """
    with run_lock(plan.out, "pr1-eval run"):  # before the model loads: a second writer is refused at once
        check_output(plan.out, plan.record)  # the plan's check, again under the lock: nothing changed since
        if _already_finished(plan, engine is None):
            return plan.out
        source = _open_source(plan, engine)
        try:
            return _run(plan, source)
        finally:
            source.close()


def _already_finished(plan: RunPlan, skips_load: bool = True) -> bool:
    """True (after the resume line) when a fixed-k run's folder holds every planned sample and its
    run.json says complete. Why: a rerun of a finished run (the cached demo) loaded the model, printed
    its weight-loading bar and the demo's "still evaluating" lines, all for nothing to generate."""
    config = plan.config
    store = RunStore(plan.out)
    if config.stop_rule() is not None or not store.exists() or store.read_run().status != "complete":
        return False
    finished = store.finished_keys()
    if any(_missing(task, config.k, finished) for task in plan.tasks.values()):
        return False
    planned = {name: len(task.loaded.problems) * config.k for name, task in plan.tasks.items()}
    line = resume_line(plan.out, planned, dict.fromkeys(planned, 0))
    if line is None:  # nothing was planned: let the run say so as it always has
        return False
    print(line + (" (the model is not loaded)" if skips_load else ""), file=sys.stderr, flush=True)
    return True


def _run(plan: RunPlan, source: ChunkSource) -> Path:
    config = plan.config
    prepared = render_prompts(plan.tasks, plan.template, source.tokenizer)
    store = RunStore(plan.out)
    # a rerun that finds nothing left to decode keeps the wall clock of the session that did the work
    earlier = store.read_run().generation if store.exists() else None
    record = dataclasses.replace(plan.record, engine=source.describe(), generation=earlier,
                                 position_unit=position_unit(source.tokenizer))  # what _make_record stores
    store.write_run(record)
    rule = config.stop_rule()
    if rule is not None:
        def generate(chunks: Sequence[Chunk], draw: Draw) -> None:
            _generate_all(config, source, prepared, chunks, store, draw)

        record = dataclasses.replace(record, adaptive=adaptive_rounds(config, rule, source, prepared, store, generate))
    else:
        finished = store.finished_keys()
        todo = {name: _missing(task, config.k, finished) for name, task in prepared.items()}
        planned = {name: len(task.loaded.problems) * config.k for name, task in prepared.items()}
        left = {name: sum(len(missing) for _, missing in problems) for name, problems in todo.items()}
        if (resumed := resume_line(plan.out, planned, left)) is not None:
            print(resumed, file=sys.stderr, flush=True)
        _generate_all(config, source, prepared, source.plan(todo, config.problems_per_chunk), store,
                      earlier=sum(planned.values()) - sum(left.values()))
    store.write_run(dataclasses.replace(record, **source.summary(), finished_at=now_iso(), status="complete"))
    return plan.out


def _generate_all(config: RunConfig, source: ChunkSource, prepared: dict[str, PreparedTask], chunks: Sequence[Chunk],
                  store: RunStore, draw: Draw | None = None, earlier: int = 0) -> None:
    """Generate ``chunks`` under one progress display (``earlier``: samples stored before this session,
    which the display names beside what is left)."""
    total = sum(c.n_samples for c in chunks)
    with RunProgress(total=total, token_budget=total * config.max_new_tokens, earlier=earlier) as bar:
        source.watch(bar)
        _generate(config, source, prepared, chunks, store, bar, draw)
