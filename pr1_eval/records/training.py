"""``TrainingSection``: the ``training`` section of a run that holds one step of a training job.

Why a record: two writers fill the section (``pr1-eval import-verl`` from a job's dumps, repro's
rollout writer while the job runs) and the report, analysis, the Training page, the nano checks and
both writers' reruns read it back. As a free dictionary each reader guessed a key's name and its
default (``.get("tags_kept", True)``); here every key is a documented field, read and checked once
(:meth:`TrainingSection.from_json` names the file and key of a bad value) and written once
(:meth:`TrainingSection.to_json`).

The JSON layout is the one both writers wrote before the record existed, key for key and in the
same order, so every stored run reads unchanged and a new run's ``run.json`` is the same bytes:

* the identity keys (``job`` … ``structure_measurable``), written when set;
* an import's keys (``structure_note`` … ``tokenizer``), written together, nulls included, when
  the section names its dump file (``source``): what ``import-verl`` always wrote;
* the rollout writer's keys (``attempt`` … ``every``), written together, nulls included, when it
  names its attempt: what repro always wrote;
* ``stage``, ``reward_mode``, ``switch_step`` and ``summary``, written when set;
* keys this version does not know, kept in :attr:`TrainingSection.extra` and written back last.

An import read back whose file predates one of its keys (``tokenizer``, before ``--tokenizer``) is
written back with that key as null: the one change a read-modify-write makes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pr1_eval.records.checks import doc_field as _doc
from pr1_eval.records.checks import read_bool, read_int, read_object, read_str, run_error
from pr1_eval.records.step_summary import StepSummary, is_current

#: The kinds of step a training job writes (its training rollouts and its validation runs), and the
#: folder each kind's step runs go to under the job's run root (:mod:`pr1_eval.ingest.training_layout`).
KIND_DIRS = {"train": "train", "validation": "val"}
TRAINING_KINDS = tuple(KIND_DIRS)


@dataclass(frozen=True)
class DumpSource:
    """The dump file an import read, and its signature: a rerun skips a step whose file is unchanged."""

    file: str | None = _doc("The step's dump file (resolved path).", None)
    size: int | None = _doc("Its size in bytes when it was read.", None)
    mtime_ns: int | None = _doc("Its modification time (ns) when it was read.", None)
    sha256: str | None = _doc("sha256 of its bytes (the rerun check when size matches but mtime does not).", None)


#: The import's keys, written together (nulls included) when the section names its dump file.
IMPORT_KEYS = ("structure_note", "source", "rows", "padding_rows_dropped", "earlier_turns_dropped", "groups",
               "problems_matched", "problems_unmatched", "rows_with_other_step", "lengths", "tokenizer")
#: The rollout writer's keys, written together (nulls included) when the section names its attempt.
ROLLOUT_KEYS = ("attempt", "expected_rows", "rows_seen", "rows_stored", "every")


@dataclass(frozen=True, kw_only=True)  # keyword-only: the fields keep run.json's key order
class TrainingSection:
    """What ``run.json``'s ``training`` says about a step of a training job (module docstring)."""

    # identity: both writers
    job: str | None = _doc("The training job's name (import-verl: the dump's job folder; repro: experiment_name).",
                           None)
    kind: str = _doc("'train' (the job's training rollouts of the step) or 'validation' (its validation run).")
    step: int = _doc("The training step (VERL's global step).")
    format: str | None = _doc("Where the rows came from: a VERL dump format (import-verl, "
                              ":mod:`pr1_eval.ingest.verl_formats`) or 'repro' (repro's rollout writer).", None)
    tags_kept: bool | None = _doc("The responses keep the Parallel-R1 tags (False for VERL 0.9.1 dumps, which "
                                  "decode with skip_special_tokens=True); None: not recorded, read as kept.", None)
    structure_measurable: bool | None = _doc("Blocks can be counted in the responses (False: parallel ratio and "
                                             "block positions are not measurable); None: not recorded.", None)
    # import-verl
    structure_note: str | None = _doc("Why structure cannot be measured, shown in place of its numbers.", None)
    source: DumpSource | None = _doc("The dump file the step was imported from (None: not an import).", None)
    rows: int | None = _doc("Rows read from the dump file (padding rows not counted).", None)
    padding_rows_dropped: int | None = _doc("Padding rows VERL added to fill a batch, dropped.", None)
    earlier_turns_dropped: int | None = _doc("Earlier turns of a multi-turn session, dropped (its last is kept).",
                                             None)
    groups: int | None = _doc("Rollout groups (one prompt's n rollouts) in the step.", None)
    problems_matched: int | None = _doc("Problems found in the known data files and benchmarks.", None)
    problems_unmatched: int | None = _doc("Problems found nowhere (task 'unmatched').", None)
    rows_with_other_step: int | None = _doc("Rows naming another step (always 0: such a file is refused).", None)
    lengths: dict[str, Any] | None = _doc("The job's ``max_prompt_length`` and ``max_response_length``, "
                                          "used to read the dump.", None)
    tokenizer: str | None = _doc("The tokenizer folder token positions were counted with (None: characters).", None)
    # repro's rollout writer
    attempt: str | None = _doc("The job attempt (Ray job id) that wrote the step; a later attempt redoes it.", None)
    expected_rows: int | None = _doc("Rollouts the step will have (None: unknown; the run stays 'running').", None)
    rows_seen: int | None = _doc("Rollouts the writers have seen so far, stored or not.", None)
    rows_stored: int | None = _doc("Rollouts stored (``every`` keeps about one training group in that many).", None)
    every: int | None = _doc("One training problem in ``every`` is kept (1 for validation).", None)
    # either writer, when known
    stage: str | None = _doc("The training stage the step belongs to, when the writer knows it.", None)
    reward_mode: str | None = _doc("The stage's reward mode (reward_kwargs.mode).", None)
    switch_step: int | None = _doc("mid_training: the step after which the reward is accuracy only.", None)
    summary: StepSummary | None = _doc("The step's numbers, computed once from its samples "
                                       "(:func:`pr1_eval.report.step_summary.step_summary`); None until the "
                                       "rollout writer completes the step, and for a summary of another "
                                       "layout version (kept verbatim in ``extra``, recomputed by readers).", None)
    extra: dict[str, Any] = _doc("Keys this version does not know, kept verbatim and written back.", factory=dict)

    @property
    def kept_tags(self) -> bool:
        """Whether the responses keep their tags (``tags_kept``; not recorded reads as kept)."""
        return self.tags_kept is not False

    @property
    def measurable(self) -> bool:
        """Whether structure can be counted: tags kept and not marked unmeasurable."""
        return self.kept_tags and self.structure_measurable is not False

    def to_json(self) -> dict[str, Any]:
        """The ``training`` object of ``run.json`` (the layout of the module docstring)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or (value is None and not self._writes_null(f.name)):
                continue
            out[f.name] = (dataclasses.asdict(value) if isinstance(value, DumpSource)
                           else value.to_json() if isinstance(value, StepSummary) else value)
        return {**out, **self.extra}

    def _writes_null(self, name: str) -> bool:
        return (name in IMPORT_KEYS and self.source is not None) or (name in ROLLOUT_KEYS and self.attempt is not None)

    @classmethod
    def from_json(cls, value: Any, where: str = "run.json") -> TrainingSection | None:
        """Read and check a ``training`` object (None stays None); ``where`` (the file) goes into every error."""
        data = read_object(value, where, "training")
        if data is None:
            return None
        kind = read_str(data.get("kind"), where, "training.kind")
        if kind not in TRAINING_KINDS:
            raise run_error(where, "training.kind", f"is {kind!r}, not one of {', '.join(TRAINING_KINDS)}")
        step = read_int(data.get("step"), where, "training.step")
        if step is None:
            raise run_error(where, "training.step", "is missing: a training section names its step")
        values: dict[str, Any] = {"kind": kind, "step": step}
        for f in dataclasses.fields(cls):
            if f.name in values or f.name == "extra":
                continue
            values[f.name] = _READERS[f.name](data.get(f.name), where, f"training.{f.name}")
        known = {f.name for f in dataclasses.fields(cls)}
        values["extra"] = {key: item for key, item in data.items() if key not in known or (key == "summary"
                           and values["summary"] is None and item is not None)}
        return cls(**values)


def _source(value: Any, where: str, name: str) -> DumpSource | None:
    data = read_object(value, where, name)
    if data is None:
        return None
    return DumpSource(file=read_str(data.get("file"), where, f"{name}.file"),
                      size=read_int(data.get("size"), where, f"{name}.size"),
                      mtime_ns=read_int(data.get("mtime_ns"), where, f"{name}.mtime_ns"),
                      sha256=read_str(data.get("sha256"), where, f"{name}.sha256"))


def _summary(value: Any, where: str, name: str) -> StepSummary | None:
    data = read_object(value, where, name)
    return StepSummary.from_json(data, where, name) if data is not None and is_current(data) else None


_READERS: dict[str, Any] = {  # field → reader (kind and step are read first, with their own errors)
    "job": read_str, "format": read_str, "tags_kept": read_bool, "structure_measurable": read_bool,
    "structure_note": read_str, "source": _source, "rows": read_int, "padding_rows_dropped": read_int,
    "earlier_turns_dropped": read_int, "groups": read_int, "problems_matched": read_int,
    "problems_unmatched": read_int, "rows_with_other_step": read_int, "lengths": read_object, "tokenizer": read_str,
    "attempt": read_str, "expected_rows": read_int, "rows_seen": read_int, "rows_stored": read_int,
    "every": read_int, "stage": read_str, "reward_mode": read_str, "switch_step": read_int, "summary": _summary,
}
