"""``pr1-eval run``: generate k samples per problem, parse, grade, and store them in chunks.

Work is done a chunk of problems at a time: all their k samples in one decoding call, then
structure parsing, pooled grading and a durable append, which run on a grader thread while the
engine generates the next chunk (the GPU does not wait for math-verify). A rerun of the same command reads the finished keys and generates only what is
missing; a rerun with different settings into the same folder is refused, since mixing two
configurations in one run would make its metrics meaningless.

The chunks come from this process's engine, or, with ``--ray``, from replicas on a Ray cluster
(:mod:`pr1_eval.scaleout.ray_pool`) that pull chunks from a queue; either way this process is
the only writer of the run store. ``--shard i/n`` keeps every n-th problem from i (job arrays;
``pr1-eval merge`` joins the shards). Progress (a bar on a terminal, log lines elsewhere):
:mod:`pr1_eval.generate.progress`.
"""

from __future__ import annotations

import dataclasses
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from pr1_eval.decoding.base import DecodedSample
from pr1_eval.engines.base import Engine, SamplingConfig, is_greedy
from pr1_eval.errors import Pr1EvalError
from pr1_eval.generate.preflight import preflight_run
from pr1_eval.generate.progress import RunProgress
from pr1_eval.generate.resume import check_resumable
from pr1_eval.grading.annotate import annotate_grades, annotate_structure, position_unit, token_offsets
from pr1_eval.inputs.paths import resolve_data_dir
from pr1_eval.inputs.prompts import PromptTemplate, apply_chat, load_template, prompt_hash
from pr1_eval.inputs.tasks import LoadedTask, Problem, load_task
from pr1_eval.records.provenance import model_identity, now_iso, package_versions
from pr1_eval.records.run import PromptInfo, RunRecord, task_entry
from pr1_eval.records.sample import SampleRecord
from pr1_eval.scaleout.queue import Chunk, engine_chunk_size, plan_chunks
from pr1_eval.scaleout.shard import parse_shard, select_shard, shard_section, shard_suffix
from pr1_eval.store.run_store import RunStore


@dataclass
class RunConfig:
    """Everything that determines a run's samples (and so goes into ``run.json``)."""

    model: str
    tasks: list[str]
    k: int = 16
    limit: int | None = None
    max_new_tokens: int = 3000
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    engine: str = "auto"
    decoding: str = "sequential"
    paths: int = 2
    max_blocks: int = 4
    after_last_block: str = "end"  # end: the paper's rollout stops after the last block; continue
    path_temperature: float | None = 1.0  # fork-join paths (official: 1.0); None: the run's temperature
    max_path_tokens: int = 4096  # fork-join per-path cap (official max_path_response_length); 0: none
    secondary_eos: str = "keep"  # a second EOS id inside a path/summary: keep (official) | replace
    prompt: str = "parallel_r1_v3"
    data_dir: str | None = None
    data_source: str = "auto"  # auto | packaged | hub (pr1_eval.inputs.tasks.load_task)
    out: str | None = None
    problems_per_chunk: int | None = None
    grade_workers: int | None = None
    grade_timeout_s: float = 10.0
    revision: str | None = None
    step: int | None = None
    engine_options: dict[str, Any] = field(default_factory=dict)
    ray: str | None = None  # None: this process; "auto" | "local" | ADDRESS: replicas on a Ray cluster
    replicas: int | None = None  # Ray replicas (None: the cluster's GPUs / gpus_per_replica)
    gpus_per_replica: int | None = None  # None: 1 on a cluster with GPUs, else 0
    shard: str | None = None  # "i/n": only every n-th problem from i, for job arrays (then `merge`)

    def sampling(self) -> SamplingConfig:
        return SamplingConfig(self.temperature, self.top_p, self.top_k, self.max_new_tokens, self.seed)

    def default_out(self) -> Path:
        name = Path(self.model.rstrip("/")).name or "model"
        suffix = shard_suffix(*parse_shard(self.shard)) if self.shard else ""
        return Path("runs") / f"{name}-{self.decoding}-k{self.k}-seed{self.seed}{suffix}"


@dataclass
class PreparedTask:
    loaded: LoadedTask
    prompts: list[str]
    prompt_ids: list[list[int]]
    task_size: int = 0  # problems of the task before --shard kept a slice of them


def _prepare(config: RunConfig, template: PromptTemplate, tokenizer: Any) -> dict[str, PreparedTask]:
    prepared = {}
    shard = parse_shard(config.shard) if config.shard else None
    for name in config.tasks:
        loaded = load_task(name, config.data_dir, config.limit, config.data_source)
        size = len(loaded.problems)
        if shard is not None:
            loaded = dataclasses.replace(loaded, problems=select_shard(loaded.problems, *shard))
        prompts = [apply_chat(tokenizer, template.render(p.problem)) for p in loaded.problems]
        ids = [list(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in prompts]
        prepared[name] = PreparedTask(loaded, prompts, ids, size)
    return prepared


def build_run_record(config: RunConfig, engine_info: dict[str, Any], decoder_info: dict[str, Any],
                     template: PromptTemplate, prepared: dict[str, PreparedTask], name: str) -> RunRecord:
    """The run's record as it starts (status ``running``); the runner completes it at the end."""
    shard = None
    if config.shard:
        index, count = parse_shard(config.shard)
        shard = shard_section(index, count, {t: [q.problem_id for q in p.loaded.problems] for t, p in prepared.items()},
                              {t: p.task_size for t, p in prepared.items()})
    return RunRecord(
        name=name, status="running",
        model=model_identity(config.model, config.revision, config.step),
        engine=engine_info, decoding=decoder_info, sampling=config.sampling().to_dict(),
        prompt=PromptInfo(name=template.name, source=template.source, sha256=template.sha256, text=template.text),
        tasks={t: task_entry([q.problem_id for q in p.loaded.problems], config.k, version=p.loaded.spec.version,
                             source=p.loaded.source, data_hash=p.loaded.data_hash)
               for t, p in prepared.items()},
        k=config.k, seed=config.seed, limit=config.limit, shard=shard, config=asdict(config), command=list(sys.argv),
        packages=package_versions(), started_at=now_iso(),
    )


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
        engine_inserted_tokens=decoded.engine_inserted_tokens, gold=problem.gold,
    )
    return annotate_structure(record, token_offsets(tokenizer, decoded.text))


def _missing(task: PreparedTask, k: int, finished: set[tuple[str, str, int]]) -> list[tuple[int, list[int]]]:
    """(problem index, missing sample indices) for every problem not yet complete."""
    out = []
    for i, problem in enumerate(task.loaded.problems):
        missing = [s for s in range(k) if (problem.task, problem.problem_id, s) not in finished]
        if missing:
            out.append((i, missing))
    return out


def _grade_and_store(records: list[SampleRecord], config: RunConfig, store: RunStore, bar: RunProgress) -> None:
    annotate_grades(records, workers=config.grade_workers, timeout_s=config.grade_timeout_s)
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

    def describe(self) -> dict[str, Any]:
        return self.engine.describe()

    def plan(self, todo: dict[str, list[tuple[int, list[int]]]], requested: int | None) -> list[Chunk]:
        return plan_chunks(todo, requested or engine_chunk_size(self.engine.name))

    def watch(self, bar: Any) -> None:
        """Report each engine call to the progress display."""
        self._watched = cast(Engine, _CallCounter(self.engine, bar.on_engine_call))

    def results(self, chunks: Sequence[Chunk], payload: Payload, k: int, sampling: SamplingConfig) -> Iterator[tuple[Chunk, Any]]:
        for chunk in chunks:
            contexts, request_ids = payload(chunk)
            yield chunk, self.decoder.decode(self._watched, contexts, k, sampling, request_ids)

    def summary(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        """The caller's engine stays open (a sweep may reuse it)."""


def _payload(prepared: dict[str, PreparedTask]) -> Payload:
    """A chunk's prompt ids and request ids (the ids seed each request: same id, same seed)."""
    def build(chunk: Chunk) -> tuple[list[list[int]], list[str]]:
        task = prepared[chunk.task]
        return ([task.prompt_ids[i] for i, _ in chunk.items],
                [f"{task.loaded.spec.name}/{task.loaded.problems[i].problem_id}" for i, _ in chunk.items])
    return build


def _generate(config: RunConfig, source: ChunkSource, prepared: dict[str, PreparedTask], chunks: Sequence[Chunk],
              store: RunStore, bar: RunProgress) -> None:
    """Turn every chunk the source yields into records, graded and stored on a grader thread while
    the next chunks generate. At most ``source.waiting_limit`` chunks wait for the grader, so memory
    stays bounded: one behind a single engine; more behind a pool, whose driver must keep handing
    out work while the grader catches up."""
    waiting: deque[Future[None]] = deque()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pr1-grade") as grader:
        for chunk, decoded in source.results(chunks, _payload(prepared), config.k, config.sampling()):
            task = prepared[chunk.task]
            records = [_make_record(task, i, s, decoded[j][s], source.tokenizer)
                       for j, (i, missing) in enumerate(chunk.items) for s in missing]
            bar.on_generated(len(records))
            while len(waiting) >= source.waiting_limit:
                waiting.popleft().result()
            waiting.append(grader.submit(_grade_and_store, records, config, store, bar))
        while waiting:
            waiting.popleft().result()


def _check_scaleout(config: RunConfig, engine: Engine | None) -> None:
    """Settings that only make sense together, refused before anything loads."""
    if is_greedy(config.temperature) and config.k > 1:
        raise Pr1EvalError(f"--temperature {config.temperature} is greedy decoding: all {config.k} samples of a problem "
                           "would be the same response (and vLLM refuses n > 1 when greedy); pass -k 1")
    if config.shard:
        parse_shard(config.shard)
    if config.ray is None and (config.replicas is not None or config.gpus_per_replica is not None):
        raise Pr1EvalError("--replicas and --gpus-per-replica need --ray (e.g. --ray auto)")
    if config.ray is not None and engine is not None:
        raise Pr1EvalError("--ray builds an engine inside every replica; it cannot use an engine loaded here")


def _open_source(config: RunConfig, engine: Engine | None, decoder: Any) -> ChunkSource:
    """This process's engine, or (``--ray``) a pool of replicas once one of them is ready."""
    if config.ray is None:
        from pr1_eval.engines.factory import make_engine

        return LocalChunks(engine or make_engine(config.engine, config.model, **config.engine_options), decoder)
    try:
        from pr1_eval.scaleout.ray_pool import RayPool, ReplicaSpec
    except ModuleNotFoundError as exc:
        if exc.name != "ray":
            raise
        raise Pr1EvalError("--ray needs Ray, which is not installed here; install it with pip install 'pr1-eval[ray]' "
                           "(the same version as the cluster's)") from None
    from pr1_eval.decoding.factory import path_options

    spec = ReplicaSpec(config.model, config.engine, dict(config.engine_options), config.decoding, config.paths,
                       config.max_blocks, config.after_last_block, path=path_options(config))
    return RayPool.start(spec, config.ray, config.replicas, config.gpus_per_replica)


def run_eval(config: RunConfig, engine: Engine | None = None) -> Path:
    """Run (or resume) an evaluation; returns the run directory."""
    from pr1_eval.decoding.factory import make_decoder, path_options

    preflight_run(config, engine)  # every input checked before a model loads
    if config.k < 1:
        raise Pr1EvalError(f"-k must be at least 1, got {config.k}")
    _check_scaleout(config, engine)
    data_dir = resolve_data_dir(config.data_dir) if config.data_source == "auto" else config.data_dir
    config.data_dir = str(data_dir) if data_dir else None
    template = load_template(config.prompt, Path(config.data_dir) if config.data_dir else None)
    decoder = make_decoder(config.decoding, paths=config.paths, max_blocks=config.max_blocks,
                           after_last_block=config.after_last_block, path=path_options(config))
    source = _open_source(config, engine, decoder)
    try:
        return _run(config, source, decoder.describe(), template)
    finally:
        source.close()


def _run(config: RunConfig, source: ChunkSource, decoder_info: dict[str, Any], template: PromptTemplate) -> Path:
    prepared = _prepare(config, template, source.tokenizer)
    out = Path(config.out) if config.out else config.default_out()
    store = RunStore(out)
    record = build_run_record(config, source.describe(), decoder_info, template, prepared, out.name)
    record = dataclasses.replace(record, position_unit=position_unit(source.tokenizer))  # what _make_record stores
    if store.exists():
        record = check_resumable(store, record)
    store.write_run(record)
    finished = store.finished_keys()
    todo = {name: _missing(task, config.k, finished) for name, task in prepared.items()}
    chunks = source.plan(todo, config.problems_per_chunk)
    with RunProgress(total=sum(c.n_samples for c in chunks)) as bar:
        source.watch(bar)
        _generate(config, source, prepared, chunks, store, bar)
    store.write_run(dataclasses.replace(record, **source.summary(), finished_at=now_iso(), status="complete"))
    return out
