"""``pr1-eval run``: generate k samples per problem, parse, grade, and store them in chunks.

Work is done a chunk of problems at a time: all their k samples in one decoding call, then
structure parsing, pooled grading and a durable append, which run on a grader thread while the
engine generates the next chunk (the GPU does not wait for math-verify). A rerun of the same command reads the finished keys and generates only what is
missing; a rerun with different settings into the same folder is refused, since mixing two
configurations in one run would make its metrics meaningless.
"""

from __future__ import annotations

import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from pr1_eval.annotate import annotate_grades, annotate_structure, token_offsets
from pr1_eval.decoding.base import DecodedSample
from pr1_eval.engines.base import Engine, SamplingConfig
from pr1_eval.errors import Pr1EvalError
from pr1_eval.paths import resolve_data_dir
from pr1_eval.preflight import preflight_run
from pr1_eval.prompts import PromptTemplate, apply_chat, load_template, prompt_hash
from pr1_eval.records import SampleRecord
from pr1_eval.runinfo import model_identity, now_iso, package_versions, task_entry
from pr1_eval.store import RunStore
from pr1_eval.tasks import LoadedTask, Problem, load_task


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
    prompt: str = "parallel_r1_v3"
    data_dir: str | None = None
    data_source: str = "auto"  # auto | packaged | hub (pr1_eval.tasks.load_task)
    out: str | None = None
    problems_per_chunk: int | None = None
    grade_workers: int | None = None
    grade_timeout_s: float = 10.0
    revision: str | None = None
    step: int | None = None
    engine_options: dict[str, Any] = field(default_factory=dict)

    def sampling(self) -> SamplingConfig:
        return SamplingConfig(self.temperature, self.top_p, self.top_k, self.max_new_tokens, self.seed)

    def chunk_size(self, engine: Engine) -> int:
        """Problems per chunk: small on HF (bounded loss on a kill), large on vLLM, whose
        scheduler needs many sequences in flight to fill a GPU."""
        if self.problems_per_chunk:
            return self.problems_per_chunk
        return 64 if engine.name == "vllm" else 8

    def default_out(self) -> Path:
        name = Path(self.model.rstrip("/")).name or "model"
        return Path("runs") / f"{name}-{self.decoding}-k{self.k}-seed{self.seed}"


@dataclass
class PreparedTask:
    loaded: LoadedTask
    prompts: list[str]
    prompt_ids: list[list[int]]


def _fingerprint(run_json: dict[str, Any]) -> dict[str, Any]:
    """The settings that must match for a rerun to resume an existing run."""
    return {
        "model": run_json["model"]["path"],
        "k": run_json["k"],
        "sampling": run_json["sampling"],
        "decoding": run_json["decoding"],
        "prompt_sha256": run_json["prompt"]["sha256"],
    }


def _check_resumable(store: RunStore, new: dict[str, Any]) -> dict[str, Any]:
    """Refuse to append to a run made with other settings; keep its tasks and start time."""
    old = store.read_run_json()
    try:
        old_fp = _fingerprint(old)
    except KeyError:
        raise Pr1EvalError(f"{store.root} holds a run.json this version cannot resume; pass a new --out") from None
    new_fp = _fingerprint(new)
    if old_fp != new_fp:
        diff = [key for key in new_fp if old_fp.get(key) != new_fp[key]]
        raise Pr1EvalError(f"{store.root} holds a run with different settings ({', '.join(diff)}); "
                           "pass a new --out, or rerun with the original settings to resume")
    for name, info in old.get("tasks", {}).items():
        newer = new["tasks"].get(name)
        if newer and newer["data_hash"] != info["data_hash"] and newer["n_problems"] == info["n_problems"]:
            raise Pr1EvalError(f"task {name!r}: the data changed since this run started (hash differs); pass a new --out")
        new["tasks"].setdefault(name, info)
    new["started_at"] = old.get("started_at", new["started_at"])
    return new


def _prepare(config: RunConfig, template: PromptTemplate, tokenizer: Any) -> dict[str, PreparedTask]:
    prepared = {}
    for name in config.tasks:
        loaded = load_task(name, config.data_dir, config.limit, config.data_source)
        prompts = [apply_chat(tokenizer, template.render(p.problem)) for p in loaded.problems]
        ids = [list(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in prompts]
        prepared[name] = PreparedTask(loaded, prompts, ids)
    return prepared


def build_run_json(config: RunConfig, engine: Engine, decoder_info: dict[str, Any], template: PromptTemplate,
                   prepared: dict[str, PreparedTask], name: str) -> dict[str, Any]:
    return {
        "name": name,
        "model": model_identity(config.model, config.revision, config.step),
        "engine": engine.describe(),
        "decoding": decoder_info,
        "sampling": config.sampling().to_dict(),
        "prompt": {"name": template.name, "source": template.source, "sha256": template.sha256, "text": template.text},
        "tasks": {
            t: task_entry([q.problem_id for q in p.loaded.problems], config.k, version=p.loaded.spec.version,
                          source=p.loaded.source, data_hash=p.loaded.data_hash)
            for t, p in prepared.items()
        },
        "k": config.k,
        "seed": config.seed,
        "limit": config.limit,
        "config": asdict(config),
        "command": sys.argv,
        "packages": package_versions(),
        "started_at": now_iso(),
        "finished_at": None,
        "status": "running",
    }


def _make_record(task: PreparedTask, index: int, sample_idx: int, decoded: DecodedSample, tokenizer: Any) -> SampleRecord:
    problem: Problem = task.loaded.problems[index]
    record = SampleRecord(
        task=problem.task, problem_id=problem.problem_id, sample_idx=sample_idx, task_version=task.loaded.spec.version,
        prompt_hash=prompt_hash(task.prompts[index]), problem=problem.problem, response=decoded.text,
        finish_reason="length" if decoded.finish_reason == "length" else "stop",
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


def _grade_and_store(records: list[SampleRecord], config: RunConfig, store: RunStore, bar: Any) -> None:
    annotate_grades(records, workers=config.grade_workers, timeout_s=config.grade_timeout_s)
    store.append(records)
    bar.update(len(records))


def _run_task(config: RunConfig, engine: Engine, decoder: Any, store: RunStore, task: PreparedTask,
              finished: set[tuple[str, str, int]], bar: Any, grader: ThreadPoolExecutor) -> None:
    """Generate chunk after chunk; each chunk is graded and stored on the grader thread while the
    engine already generates the next one (at most one chunk waits, so memory stays bounded)."""
    todo = _missing(task, config.k, finished)
    pending: Future[None] | None = None
    chunk_size = config.chunk_size(engine)
    for start in range(0, len(todo), chunk_size):
        chunk = todo[start : start + chunk_size]
        request_ids = [f"{task.loaded.spec.name}/{task.loaded.problems[i].problem_id}" for i, _ in chunk]
        decoded = decoder.decode(engine, [task.prompt_ids[i] for i, _ in chunk], config.k, config.sampling(), request_ids)
        records = [
            _make_record(task, i, s, decoded[j][s], engine.tokenizer)
            for j, (i, missing) in enumerate(chunk) for s in missing
        ]
        if pending is not None:
            pending.result()
        pending = grader.submit(_grade_and_store, records, config, store, bar)
    if pending is not None:
        pending.result()


def run_eval(config: RunConfig, engine: Engine | None = None) -> Path:
    """Run (or resume) an evaluation; returns the run directory."""
    from pr1_eval.decoding.factory import make_decoder
    from pr1_eval.engines.factory import make_engine

    preflight_run(config, engine)  # every input checked before a model loads
    if config.k < 1:
        raise Pr1EvalError(f"-k must be at least 1, got {config.k}")
    data_dir = resolve_data_dir(config.data_dir) if config.data_source == "auto" else config.data_dir
    config.data_dir = str(data_dir) if data_dir else None
    template = load_template(config.prompt, Path(config.data_dir) if config.data_dir else None)
    engine = engine or make_engine(config.engine, config.model, **config.engine_options)
    decoder = make_decoder(config.decoding, paths=config.paths, max_blocks=config.max_blocks)
    prepared = _prepare(config, template, engine.tokenizer)
    out = Path(config.out) if config.out else config.default_out()
    store = RunStore(out)
    run_json = build_run_json(config, engine, decoder.describe(), template, prepared, out.name)
    if store.exists():
        run_json = _check_resumable(store, run_json)
    store.write_run_json(run_json)
    finished = store.finished_keys()
    total = sum(len(m) for t in prepared.values() for _, m in _missing(t, config.k, finished))
    with tqdm(total=total, desc="samples", unit="sample", disable=None) as bar, \
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="pr1-grade") as grader:
        for task in prepared.values():
            _run_task(config, engine, decoder, store, task, finished, bar, grader)
    run_json["finished_at"], run_json["status"] = now_iso(), "complete"
    store.write_run_json(run_json)
    return out

