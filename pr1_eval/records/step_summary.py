"""``StepSummary``: one training step's numbers, as ``run.json`` keeps them in ``training.summary``.

Why a record: the writers of a step's run compute it once
(:func:`pr1_eval.report.step_summary.step_summary`, where each value's definition lives) and the
Training page, the leaderboard of validation steps, the notebooks and the nano checks read it back.
As a dictionary each reader spelled its keys; here they are documented fields, checked when read
(a bad value names the file and key) and written in the stored order.

Layout version :data:`STEP_SUMMARY_VERSION`. A summary of another version is not read as this one:
the training section keeps it verbatim (:class:`pr1_eval.records.training.TrainingSection`) and
readers recompute the numbers from the samples. Summaries stored before the token-latency keys
(``critical_path_mean``, ``speedup``, ``length_unit``) existed read them as None and are written
back without them (:attr:`StepSummary.unrecorded`), so a read-modify-write leaves their bytes alone.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pr1_eval.records.checks import doc_field as _doc
from pr1_eval.records.checks import read_float, read_int, read_object, read_str, run_error

#: Version of the summary's layout (its keys below); a reader that finds another recomputes it.
STEP_SUMMARY_VERSION = 1
#: Keys added to version 1 after it was first written: a stored summary may lack them.
LATE_KEYS = ("critical_path_mean", "speedup", "length_unit")


@dataclass(frozen=True, kw_only=True)  # keyword-only: the fields keep run.json's key order
class StepSummary:
    """Every value is over the step's samples as stored (module docstring of
    :mod:`pr1_eval.report.step_summary` for how each is computed)."""

    version: int = _doc("Layout version (:data:`STEP_SUMMARY_VERSION`).", STEP_SUMMARY_VERSION)
    n_samples: int = _doc("Samples in the step.")
    n_problems: int = _doc("Distinct (task, problem) in the step.")
    k: int = _doc("Most samples one problem has (0 for an empty step).")
    reward_mean: float | None = _doc("Mean of the job's reward over the samples that have one.", None)
    accuracy: float | None = _doc("Share correct: the grader's verdict, else the job's reward accuracy.", None)
    best_at_k: float | None = _doc("Mean over problems of VERL's best@k at the step's k; None when k is 1.", None)
    parallel_ratio: float | None = _doc("Share of samples with a <Parallel> block; None without tags.", None)
    blocks_per_response: float | None = _doc("Mean blocks per sample; None without tags.", None)
    first_block_rel_pos: float | None = _doc("Mean relative start of the first block, over samples with one; "
                                             "None without tags.", None)
    response_tokens_mean: float | None = _doc("Mean response tokens over the samples that count them.", None)
    truncated_ratio: float | None = _doc("Share of samples cut by the length budget.", None)
    critical_path_mean: float | None = _doc("Mean critical path in length_unit; None without tags or units.", None)
    speedup: float | None = _doc("Mean response length / mean critical path (token-latency speedup).", None)
    length_unit: str | None = _doc("'token' or 'char': the unit of the two above; 'mixed' when samples differ.", None)
    unrecorded: tuple[str, ...] = _doc("Keys of :data:`LATE_KEYS` the stored summary predates: read as None, "
                                       "written back absent.", ())
    extra: dict[str, Any] = _doc("Keys this version does not know, kept verbatim and written back.", factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The ``training.summary`` object of ``run.json``."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name not in ("unrecorded", "extra") and f.name not in self.unrecorded}
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, value: Any, where: str = "run.json", name: str = "training.summary") -> StepSummary | None:
        """Read and check a summary of this version (None stays None); refuses another version
        (:func:`is_current` tells them apart first)."""
        data = read_object(value, where, name)
        if data is None:
            return None
        if not is_current(data):
            raise run_error(where, f"{name}.version", f"is {data.get('version')!r}, not {STEP_SUMMARY_VERSION}")
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in ("unrecorded", "extra"):
                continue
            key = f"{name}.{f.name}"
            raw = data.get(f.name)
            if f.name in ("version", "n_samples", "n_problems", "k"):
                values[f.name] = read_int(raw, where, key)
                if values[f.name] is None:
                    raise run_error(where, key, "is missing")
            else:
                values[f.name] = read_str(raw, where, key) if f.name == "length_unit" else read_float(raw, where, key)
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**values, unrecorded=tuple(k for k in LATE_KEYS if k not in data),
                   extra={k: v for k, v in data.items() if k not in known})


def is_current(data: dict[str, Any]) -> bool:
    """Whether a stored summary has this version's layout (else it is kept as it is and recomputed)."""
    return data.get("version") == STEP_SUMMARY_VERSION


#: The summary's values, in the order tables show them.
STEP_SUMMARY_KEYS = tuple(f.name for f in dataclasses.fields(StepSummary)
                          if f.name not in ("version", "unrecorded", "extra"))
