"""A run, planned once before any model loads: :class:`RunPlan`, then the runner executes it.

Why: every input of a run (the task files, the template, the decoding, the output folder, the
model's identity, whether a stored run is resumed) is read and checked here, once, and kept in a
frozen value; the runner (:func:`pr1_eval.generate.runner.execute`) only uses it. Reading the
inputs once is what makes the checks honest (the run uses exactly what was checked) and a sweep
cheap: the part that does not depend on the model (:class:`RunInputs`) is built once for all its
checkpoints and one plan is derived per checkpoint (:func:`derive_plan`).

Prompt rendering is the first step of execution, not part of the plan: it needs the model's
tokenizer (its chat template), which comes with the engine.

The checks are :mod:`pr1_eval.generate.preflight`'s, run in its ``CHECK_ORDER``.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pr1_eval.decoding.factory import DecodingSpec
from pr1_eval.engines.openai_client import public_argv, public_options
from pr1_eval.generate.config import RunConfig
from pr1_eval.generate.preflight import (
    check_decoding,
    check_engine,
    check_greedy,
    check_k,
    check_limit,
    check_model,
    check_openai,
    check_output,
    check_prompt,
    check_scaleout,
    check_served_model,
    check_tasks,
)
from pr1_eval.generate.progress import progress_interval
from pr1_eval.generate.sampling_limits import check_sampling_limits
from pr1_eval.inputs.model_fingerprint import model_fingerprint
from pr1_eval.inputs.paths import resolve_data_dir
from pr1_eval.inputs.prompts import PromptTemplate
from pr1_eval.inputs.tasks import LoadedTask
from pr1_eval.records.answer_policy import check_policy, default_policy
from pr1_eval.records.limit import LIMIT_SIZES_KEY, LIMIT_WARNING
from pr1_eval.records.provenance import model_identity, now_iso, package_versions
from pr1_eval.records.run import PromptInfo, RunRecord, task_entry
from pr1_eval.scaleout.shard import parse_shard, select_shard, shard_section


@dataclass(frozen=True)
class PlannedTask:
    """One task as the run generates it: its problems (this shard's, with ``--shard``) and how many
    the task has before the shard kept its slice."""

    loaded: LoadedTask
    task_size: int

    @property
    def problem_ids(self) -> list[str]:
        return [p.problem_id for p in self.loaded.problems]


@dataclass(frozen=True)
class RunInputs:
    """What a run reads and checks that does not depend on the model: a sweep's shared part."""

    config: RunConfig
    """The options, with ``data_dir`` resolved (``--data-dir``, else ``$PR1_DATA_DIR``), as ``run.json`` records them."""
    tasks: Mapping[str, PlannedTask]
    template: PromptTemplate
    decoding: DecodingSpec
    engine: str
    """The engine that will generate: ``hf`` or ``vllm`` (``auto`` resolved), or the given engine's name."""
    shard: tuple[int, int] | None


@dataclass(frozen=True)
class RunPlan:
    """One run, every input read and checked: what the runner executes."""

    inputs: RunInputs
    config: RunConfig
    """The run's own options: the shared ones with this run's model, output folder and step."""
    out: Path
    record: RunRecord
    """``run.json`` as the run starts (a resumed run keeps its stored tasks and start time); the
    runner adds what only the loaded engine knows (its description, the position unit)."""
    resumes: bool
    """The output folder holds this run already: finished samples are kept, the rest generated."""
    model_source: str
    """``local``, ``hub-cache`` (a hub id found in the local cache), ``hub``, ``served`` (``--engine
    openai``: the weights are the server's, only the tokenizer was checked here), or ``not checked``
    (the caller brought its own engine)."""

    @property
    def tasks(self) -> Mapping[str, PlannedTask]:
        return self.inputs.tasks

    @property
    def template(self) -> PromptTemplate:
        return self.inputs.template

    @property
    def decoding(self) -> DecodingSpec:
        return self.inputs.decoding


def plan_inputs(config: RunConfig, engine: Any = None, warn: bool = True) -> RunInputs:
    """The checks and reads that do not depend on the model, in ``CHECK_ORDER`` (``k`` to ``decoding``).

    With ``engine`` (a caller that brings its own loaded engine: tests, the demo) ``--engine`` is not
    checked and decoding is checked against that engine; with ``--ray`` the engines load in the
    replicas, so vllm need not be installed here.
    """
    check_k(config.k)
    config.stop_rule()  # the adaptive rule's parameters, checked before anything loads
    check_limit(config.limit)
    progress_interval()  # a bad $PR1_EVAL_PROGRESS_SECONDS: refused now, not after the model loads
    if config.limit is not None and warn:  # lm-eval's warning, once per run (``warn``: a second plan is quiet)
        print(f"warning: --limit {config.limit}: only the first {config.limit} problem(s) of each task; {LIMIT_WARNING}",
              file=sys.stderr)
    check_greedy(config.temperature, config.k)
    check_sampling_limits(config)  # every value vLLM would refuse, before anything loads
    data_dir = resolve_data_dir(config.data_dir) if config.data_source == "auto" else config.data_dir
    config = dataclasses.replace(config, data_dir=str(data_dir) if data_dir else None)
    loaded = check_tasks(list(config.tasks), config.data_dir, config.limit, config.data_source)
    template = check_prompt(config.prompt, config.data_dir)
    if engine is not None:
        engine_name = str(engine.name)
    elif config.ray is not None:
        engine_name = config.engine
    else:
        engine_name = check_engine(config.engine)
    decoding = check_decoding(config, engine_name)
    if engine is None and config.engine == "openai":
        check_openai(config)
    check_scaleout(config.ray, config.replicas, config.gpus_per_replica, engine_given=engine is not None)
    shard = parse_shard(config.shard) if config.shard else None
    tasks = {name: PlannedTask(task if shard is None else
                               dataclasses.replace(task, problems=select_shard(task.problems, *shard)),
                               len(task.problems))
             for name, task in loaded.items()}
    return RunInputs(config, tasks, template, decoding, engine_name, shard)


#: The options of ``pr1-eval run`` whose fact has a typed home in ``run.json``, written and read
#: there: the model section (path, revision, step), the tasks with their ``k``, the run's ``k``,
#: ``seed``, ``limit`` and ``shard``, the prompt, the answer policy, the sampling section and the
#: decoding section (which records every parameter its decoding uses, under the option's name), and
#: the adaptive section (the stopping rule's parameters).
HOMED_OPTIONS = frozenset({"model", "revision", "step", "tasks", "k", "seed", "limit", "shard", "prompt",
                           "answer_policy", "temperature", "top_p", "top_k", "max_new_tokens", "decoding", "paths",
                           "max_blocks", "after_last_block", "path_temperature", "max_path_tokens", "secondary_eos",
                           "adaptive", "round_size", "adaptive_alpha", "adaptive_margin"})


def execution_options(config: RunConfig) -> dict[str, Any]:
    """``run.json``'s ``config``: how the command ran (engine asked for, data folder and source,
    output folder, chunking, grading workers and timeout, engine options, Ray placement), the
    options no typed section holds. Why not the whole :class:`RunConfig`: each fact has one home,
    so a reader never has to choose between ``sampling.temperature`` and ``config.temperature``
    (runs written before keep their full ``config``; nothing reads the duplicated keys)."""
    options = {key: value for key, value in asdict(config).items() if key not in HOMED_OPTIONS}
    options["engine_options"] = public_options(options.get("engine_options") or {})  # no API key, no URL secrets
    return options


def planned_record(inputs: RunInputs, config: RunConfig, name: str) -> RunRecord:
    """The run's record as it starts (status ``running``); the runner completes it at the end."""
    tasks = inputs.tasks
    shard = None
    if inputs.shard is not None:
        shard = shard_section(*inputs.shard, {t: p.problem_ids for t, p in tasks.items()},
                              {t: p.task_size for t, p in tasks.items()})
    template = inputs.template
    model = model_identity(config.model, config.revision, config.step, config.family)
    model.fingerprint = model_fingerprint(config.model)  # a resume with other weights is refused (resume.py)
    return RunRecord(
        name=name, status="running",
        model=model,
        decoding=inputs.decoding.describe(), sampling=config.sampling().to_dict(),
        prompt=PromptInfo(name=template.name, source=template.source, sha256=template.sha256, text=template.text),
        tasks={t: task_entry(p.problem_ids, config.k, version=p.loaded.spec.version, source=p.loaded.source,
                             data_hash=p.loaded.data_hash)
               for t, p in tasks.items()},
        k=config.k, seed=config.seed, limit=config.limit, shard=shard, config=execution_options(config),
        command=public_argv(sys.argv),
        answer_policy=config.answer_policy or default_policy(template.name),
        packages=package_versions(), started_at=now_iso(), adaptive=_adaptive_section(config),
        extra={} if config.limit is None else {LIMIT_SIZES_KEY: {t: p.loaded.n_available for t, p in tasks.items()}},
    )


def _adaptive_section(config: RunConfig) -> dict[str, Any] | None:
    """run.json's ``adaptive`` section as a run starts: the rule and its parameters (the runner adds
    ``samples_drawn`` and ``settled`` as it ends)."""
    rule = config.stop_rule()
    return None if rule is None else rule.to_dict()


def derive_plan(inputs: RunInputs, *, model: str | None = None, out: str | None = None, step: int | None = None,
                check_the_model: bool = True) -> RunPlan:
    """The plan of one run from the shared inputs: the output folder and the model checked last
    (``CHECK_ORDER``'s ``output`` and ``model``). ``model``, ``out`` and ``step`` replace the
    shared options' (a sweep's checkpoint); ``check_the_model=False`` when an engine is given."""
    config = inputs.config
    config = dataclasses.replace(config, model=model if model is not None else config.model,
                                 out=out if out is not None else config.out,
                                 step=step if step is not None else config.step,
                                 answer_policy=check_policy(config.answer_policy) if config.answer_policy
                                 else default_policy(inputs.template.name))
    folder = Path(config.out) if config.out else config.default_out()
    record = planned_record(inputs, config, folder.name)
    stored = check_output(folder, record)
    if not check_the_model:
        source = "not checked"
    elif config.engine == "openai":  # the weights are the server's
        source = check_served_model(config.model, config.engine_options.get("tokenizer"), config.revision)
    else:
        source = check_model(config.model, config.revision)
    return RunPlan(inputs, config, folder, stored or record, stored is not None, source)


def build_plan(config: RunConfig, engine: Any = None) -> RunPlan:
    """Every check ``pr1-eval run`` needs, in ``CHECK_ORDER``, and every input read once; raises
    the first problem found. With ``engine`` the model path is not checked (it is loaded)."""
    return derive_plan(plan_inputs(config, engine), check_the_model=engine is None)
