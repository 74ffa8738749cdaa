"""``RunRecord``: the one typed, versioned record of a run, stored as its ``run.json``.

Why one record: the runner, the JSONL and lm-eval imports, a sweep, a shard merge, ``regrade``,
the report and the analysis all read or write ``run.json``. When each built or read its own
dictionary, a key written by one (``model.family``, a task's ``problem_ids``) was read by another
under a guessed name and a default. Now every writer builds a :class:`RunRecord`, the run store
(:meth:`pr1_eval.store.run_store.RunStore.write_run`) is the only code that turns it into JSON,
and :meth:`RunRecord.from_dict` is the only code that reads JSON back: it checks every field's
type and names the file and field of a bad one.

Versions (``record_version``):

* **1** — files written before the record was versioned: the same layout, no version key. They
  are read as they are; fields they lack are ``None``.
* **2** — this layout, with ``record_version``. A file from a newer pr1-eval is refused with the
  advice to upgrade, never misread. ``position_unit`` was added to version 2 as an optional key
  (absent: not recorded, each sample's own ``position_unit`` says): a pr1-eval that predates it
  keeps it in :attr:`RunRecord.extra`, so no version bump was needed to stay readable both ways.
  ``training`` (a training job's own rollouts or validation, from ``import-verl``) and
  ``answer_policy`` (absent: ``paper``, the one reading before policies) and ``model.fingerprint``
  (the model folder's weights and tokenizer, :mod:`pr1_eval.inputs.model_fingerprint`) were added
  the same way, and so was ``generation`` (the wall clock of a generated run's engine calls) and
  ``adaptive`` (an adaptive run's stopping rule and samples drawn per problem).

Keys this version does not know (a newer writer's, or one added by hand) are kept in
:attr:`RunRecord.extra` and written back unchanged, so a read-modify-write never loses them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.records.answer_policy import ANSWER_POLICIES, DEFAULT_POLICY
from pr1_eval.records.checks import read_count as _count
from pr1_eval.records.checks import read_int as _int
from pr1_eval.records.checks import read_list as _list
from pr1_eval.records.checks import read_object as _object
from pr1_eval.records.checks import read_str as _str
from pr1_eval.records.checks import run_error
from pr1_eval.records.training import TrainingSection

RUN_RECORD_VERSION = 2
#: What every table and page shows for a structure figure (parallel ratio, format check, block
#: positions) of a run whose tags did not survive (:attr:`RunRecord.structure_measurable` false);
#: JSON gives null. Never a number: ``0.000`` would read as "the model never branches".
NOT_MEASURABLE = "n/a (tags stripped by VERL 0.9.1)"
#: The same for an answers-only import (:attr:`RunRecord.answers_only`): its responses are each
#: branch's final answer, so parallel ratio, format check, positions and lengths were not measured.
ANSWERS_ONLY = ("not measured (answers-only import: each sample holds only its branch's final answer, "
                "no response text to count blocks, tags or tokens in)")


@dataclass
class ModelInfo:
    """Which checkpoint produced the samples."""

    path: str | None = None  # local folder (resolved) or hub id; None for an import that names no model
    revision: str | None = None  # hub revision, or the git commit of a local checkout
    step: int | None = None  # training step (``--step``, or ``global_step_N`` in the path)
    family: str | None = None  # the training job the checkpoint belongs to (set by a sweep)
    #: A local folder's weights and tokenizer (:func:`pr1_eval.inputs.model_fingerprint.model_fingerprint`):
    #: a resume with another one is refused. None for hub ids, imports and runs recorded before it existed.
    fingerprint: dict[str, Any] | None = None


@dataclass
class TaskEntry:
    """One task as the run declared it: where its data came from and what the run promises."""

    version: str | None = None
    source: str | None = None  # data file, "packaged", hub id, or the import file
    data_hash: str | None = None  # sha256 of the task's data
    n_problems: int | None = None
    problem_ids: list[str] | None = None  # None in version-1 files that recorded only the count
    problem_ids_sha256: str | None = None
    k: int | None = None  # samples per problem; None: the run's k


@dataclass
class PromptInfo:
    """The prompt template every problem was rendered with."""

    name: str | None = None
    source: str | None = None
    sha256: str | None = None
    text: str | None = None


@dataclass
class RunRecord:
    """Everything ``run.json`` says about a run. Sections whose layout belongs to another module
    (``engine``, ``decoding``, ``sampling``, ``shard``, ``scaleout``, ``lm_eval``) are dictionaries
    that module documents; the record checks that they are objects."""

    name: str | None = None
    status: str | None = None  # running | importing | merging until every sample is stored, then complete
    model: ModelInfo = field(default_factory=ModelInfo)
    tasks: dict[str, TaskEntry] = field(default_factory=dict)
    k: int | None = None  # samples per problem when every task has the same
    engine: dict[str, Any] = field(default_factory=dict)  # backend and its settings
    decoding: dict[str, Any] = field(default_factory=dict)  # mode and every protocol parameter
    sampling: dict[str, Any] | None = None
    prompt: PromptInfo | None = None
    seed: int | None = None
    limit: int | None = None
    shard: dict[str, Any] | None = None  # index, count, problem ids per task (pr1_eval.scaleout.shard)
    config: dict[str, Any] | None = None  # how the command ran: the options no other section holds (generate.plan.execution_options)
    command: list[str] | None = None
    packages: dict[str, str | None] = field(default_factory=dict)
    started_at: str | None = None
    finished_at: str | None = None
    imported_from: str | None = None  # the file an import read
    k_option: Any = None  # an import's ``--k`` (int or task → int)
    samples_left_out_by_k: int | None = None  # samples beyond an import's k, not stored
    lm_eval: list[dict[str, Any]] | None = None  # lm-eval runs an import came from
    scaleout: dict[str, Any] | None = None  # Ray replica statistics
    regraded_at: str | None = None
    merged_at: str | None = None
    merged_from: list[dict[str, Any]] | None = None
    #: Unit of every sample's block positions (``block_rel_starts``): 'token' when the run knew a
    #: tokenizer (generation, or ``import --tokenizer``), 'char' otherwise; None when not recorded.
    position_unit: str | None = None
    #: A step of a training job (``pr1-eval import-verl``, repro's rollout writer): job, kind ('train'
    #: or 'validation'), step, whether the tags survived, the writer's bookkeeping and the step's
    #: summary; every key in :class:`pr1_eval.records.training.TrainingSection`. None for evaluation runs.
    training: TrainingSection | None = None
    #: The answer policy the run was graded under (``paper`` or ``lenient``, :mod:`pr1_eval.grading.policy`);
    #: None in runs written before policies existed, which were all graded under ``paper`` (:attr:`policy`).
    answer_policy: str | None = None
    #: Wall clock of the generation (:mod:`pr1_eval.generate.wall_clock`): each engine call (wave)
    #: of the session that finished the run, with its requests and seconds. None for imports, Ray
    #: runs and runs generated before it was recorded.
    generation: dict[str, Any] | None = None
    #: An adaptive run (``run --adaptive``): the stopping rule and its parameters (``rule``, ``max_k``,
    #: ``round_size``, ``alpha``, ``margin``, ``prior``: :class:`pr1_eval.stats.sequential.StopRule`) and,
    #: once the run ends, ``samples_drawn`` (task → problem id → samples drawn) and ``settled`` (task →
    #: problem id → -1 or +1, the side its p was settled on; unsettled problems are absent). None for
    #: fixed-k runs, whose every problem holds k samples.
    adaptive: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys this version does not know, kept verbatim
    record_version: int = RUN_RECORD_VERSION  # of the file this record was read from

    # ----- derived facts every reader needs ------------------------------------------------------
    @property
    def backend(self) -> str | None:
        """``hf``, ``vllm``, ``import``, ``lm-eval`` … (``engine.backend``)."""
        value = self.engine.get("backend")
        return None if value is None else str(value)

    @property
    def imported(self) -> bool:
        """The samples were generated elsewhere (a JSONL or lm-eval import)."""
        return bool(self.imported_from) or self.backend in ("import", "lm-eval")

    @property
    def policy(self) -> str:
        """The answer policy the samples were graded under: :attr:`answer_policy`, else ``paper``
        (the only reading before policies were recorded)."""
        return self.answer_policy or DEFAULT_POLICY

    @property
    def answers_only(self) -> bool:
        """The samples hold only each branch's final answer (``trajectories.answers_only``, written by
        ``import --format parallel-probe``): no response text, so nothing to count tags or tokens in."""
        section = self.extra.get("trajectories")
        return isinstance(section, dict) and section.get("answers_only") is True

    @property
    def structure_measurable(self) -> bool:
        """Whether the samples' tags can be counted: False for a training dump whose decoder
        deleted them (``training.structure_measurable``, set by ``import-verl`` for VERL 0.9.1) and
        for an answers-only import (:attr:`answers_only`). Where False, structure and token-latency
        figures are absent and stated as :attr:`not_measured`, never ``0.000`` ("never branches")."""
        return not (self.training is not None and self.training.structure_measurable is False) and not self.answers_only

    @property
    def not_measured(self) -> str:
        """What a table shows in place of a structure figure of a run where :attr:`structure_measurable`
        is False: :data:`ANSWERS_ONLY` or :data:`NOT_MEASURABLE`."""
        return ANSWERS_ONLY if self.answers_only else NOT_MEASURABLE

    def task_k(self, task: str) -> int | None:
        """Samples per problem of ``task``: its own k, else the run's."""
        entry = self.tasks.get(task)
        return (entry.k if entry is not None and entry.k else None) or self.k

    def with_sections(self, sections: Mapping[str, Any]) -> RunRecord:
        """A copy with sections another module built (an lm-eval import's ``lm_eval``, ``engine``,
        ``sampling``); a key that is not a field of this record is kept in :attr:`extra`."""
        names = {f.name for f in dataclasses.fields(self)} - {"extra", "model", "tasks", "prompt"}
        known = {key: value for key, value in sections.items() if key in names}
        unknown = {key: value for key, value in sections.items() if key not in names}
        return dataclasses.replace(self, **known, extra={**self.extra, **unknown})

    # ----- the JSON form -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The ``run.json`` object (known fields in declaration order, then :attr:`extra`), stamped
        with this version's :data:`RUN_RECORD_VERSION`: whatever was read is written in today's layout."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        out["record_version"] = RUN_RECORD_VERSION
        out["model"] = dataclasses.asdict(self.model)
        if out["model"]["fingerprint"] is None:  # kept out of runs that have none, as the optional sections
            del out["model"]["fingerprint"]
        out["tasks"] = {name: dataclasses.asdict(entry) for name, entry in self.tasks.items()}
        out["prompt"] = None if self.prompt is None else dataclasses.asdict(self.prompt)
        out["training"] = None if self.training is None else self.training.to_json()
        for key in ("k_option", "samples_left_out_by_k", "lm_eval", "scaleout", "regraded_at", "merged_at",
                    "merged_from", "imported_from", "position_unit", "training", "answer_policy", "generation", "adaptive"):
            if out[key] is None:  # optional sections stay out of runs that have none
                del out[key]
        return {**out, **self.extra}

    @classmethod
    def from_dict(cls, data: Any, where: str = "run.json") -> RunRecord:
        """Read and check a ``run.json`` object; ``where`` (the file) goes into every error."""
        return read_run_record(cls, data, where)


def task_entry(problem_ids: Sequence[str], k: int, *, version: str | None, source: str | None,
               data_hash: str | None) -> TaskEntry:
    """The record of one task: where its data came from and the problems and samples per problem
    the run promises. Every writer (runner, imports, merge) builds its tasks with this."""
    ids = [str(p) for p in problem_ids]
    return TaskEntry(version=version, source=source, data_hash=data_hash, n_problems=len(ids), problem_ids=ids,
                     problem_ids_sha256=problem_ids_sha256(ids), k=int(k))


def task_entries(tasks: Mapping[str, TaskEntry]) -> dict[str, TaskEntry]:
    """A copy of a task map whose entries can be edited without touching the original."""
    return {name: dataclasses.replace(entry) for name, entry in tasks.items()}


def problem_ids_sha256(problem_ids: Sequence[str]) -> str:
    """sha256 of the ordered problem ids (compare two runs' problem sets without listing them)."""
    return hashlib.sha256(json.dumps([str(p) for p in problem_ids], ensure_ascii=False).encode()).hexdigest()


# ----- reading ``run.json`` (the field readers and the why of strictness: :mod:`.checks`) -------


#: The values ``position_unit`` may take (a run's samples and the run itself).
POSITION_UNITS = ("token", "char")


def _unit(value: Any, where: str, name: str) -> str | None:
    text = _str(value, where, name)
    if text is not None and text not in POSITION_UNITS:
        raise run_error(where, name, f"must be one of {', '.join(POSITION_UNITS)}, found {text!r}")
    return text


def _model(value: Any, where: str) -> ModelInfo:
    data = _object(value, where, "model") or {}
    return ModelInfo(path=_str(data.get("path"), where, "model.path"),
                     revision=_str(data.get("revision"), where, "model.revision"),
                     step=_count(data.get("step"), where, "model.step"),
                     family=_str(data.get("family"), where, "model.family"),
                     fingerprint=_object(data.get("fingerprint"), where, "model.fingerprint"))


def _task(name: str, value: Any, where: str) -> TaskEntry:
    data = _object(value, where, f"tasks.{name}") or {}
    ids = _list(data.get("problem_ids"), where, f"tasks.{name}.problem_ids")
    entry = TaskEntry(version=_str(data.get("version"), where, f"tasks.{name}.version"),
                      source=_str(data.get("source"), where, f"tasks.{name}.source"),
                      data_hash=_str(data.get("data_hash"), where, f"tasks.{name}.data_hash"),
                      n_problems=_count(data.get("n_problems"), where, f"tasks.{name}.n_problems"),
                      problem_ids=None if ids is None else [str(i) for i in ids],
                      problem_ids_sha256=_str(data.get("problem_ids_sha256"), where, f"tasks.{name}.problem_ids_sha256"),
                      k=_count(data.get("k"), where, f"tasks.{name}.k", low=1))
    if entry.n_problems is None and entry.problem_ids is not None:
        entry.n_problems = len(entry.problem_ids)
    return entry


def _prompt(value: Any, where: str) -> PromptInfo | None:
    data = _object(value, where, "prompt")
    if data is None:
        return None
    return PromptInfo(**{key: _str(data.get(key), where, f"prompt.{key}") for key in ("name", "source", "sha256", "text")})


def _policy(value: Any, where: str, name: str) -> str | None:
    text = _str(value, where, name)
    if text is not None and text not in ANSWER_POLICIES:
        raise run_error(where, name, f"is {text!r}, not an answer policy ({', '.join(ANSWER_POLICIES)})",
                        "fix the file, or regrade the run with pr1-eval regrade RUN --answer-policy POLICY")
    return text


#: The statuses pr1-eval's writers record: the first three while samples are being stored, then
#: ``complete``. Anything else is a hand edit or damage and is refused when read (so the report, the
#: leaderboard and the analysis, which all read through here, agree: none of them ranks it). A
#: missing status (records written before it existed, or by tests) stays ``None``, "not recorded",
#: and is read like ``running``: the report calls the run incomplete, the leaderboard ranks it only
#: when every task holds all its samples, with a note naming the status.
RUN_STATUSES = ("running", "importing", "merging", "complete")


def _status(value: Any, where: str) -> str | None:
    text = _str(value, where, "status")
    if text is not None and text not in RUN_STATUSES:
        raise run_error(where, "status", f"is {text!r}, not one of {', '.join(RUN_STATUSES)}",
                        "set it back to what the run's writer wrote (rerun that command to finish the run)")
    return text


def _version(data: dict[str, Any], where: str) -> int:
    version = _int(data.get("record_version"), where, "record_version") or 1
    if version > RUN_RECORD_VERSION:
        raise run_error(where, "record_version", f"is {version}, newer than this pr1-eval reads ({RUN_RECORD_VERSION})",
                        "upgrade pr1-eval (pull and reinstall it) to read this run")
    return version


_SIMPLE: dict[str, Any] = {  # field → reader, for the fields that need no nesting
    "name": _str, "status": lambda value, where, name: _status(value, where), "seed": _int,
    "limit": lambda value, where, name: _count(value, where, name, low=1),
    "k": lambda value, where, name: _count(value, where, name, low=1), "started_at": _str, "finished_at": _str,
    "imported_from": _str, "regraded_at": _str, "merged_at": _str,
    "decoding": _object, "sampling": _object, "shard": _object, "config": _object,
    "samples_left_out_by_k": _count, "scaleout": _object, "packages": _object,
    "command": _list, "lm_eval": _list, "merged_from": _list, "position_unit": _unit,
    "training": lambda value, where, _: TrainingSection.from_json(value, where),
    "answer_policy": _policy, "generation": _object, "adaptive": _object,
}


def read_run_record(cls: type[RunRecord], data: Any, where: str) -> RunRecord:
    """Build ``cls`` from a parsed ``run.json``; raises :class:`Pr1EvalError` naming the bad field."""
    if not isinstance(data, dict):
        raise Pr1EvalError(f"{where}: not a run record (expected a JSON object, found {type(data).__name__}); "
                           "fix the file or rerun the run")
    known = {f.name for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {key: reader(data.get(key), where, key) for key, reader in _SIMPLE.items()}
    for key in ("decoding", "packages"):
        values[key] = values[key] or {}
    engine = data.get("engine")  # a bare string is a backend name (hand-written files)
    values["engine"] = {"backend": engine} if isinstance(engine, str) else _object(engine, where, "engine") or {}
    tasks = _object(data.get("tasks"), where, "tasks") or {}
    values["tasks"] = {str(name): _task(str(name), value, where) for name, value in tasks.items()}
    values["model"] = _model(data.get("model"), where)
    values["prompt"] = _prompt(data.get("prompt"), where)
    values["k_option"] = data.get("k_option")
    values["record_version"] = _version(data, where)
    values["extra"] = {key: value for key, value in data.items() if key not in known}
    return cls(**values)

