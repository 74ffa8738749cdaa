"""When may a rerun append to an existing run folder? One rule, applied when a run is planned,
before any model loads (:func:`pr1_eval.generate.preflight.check_output`).

Why: a run folder must hold samples of one configuration. Appending samples generated with
another model, k, sampling, decoding, prompt or shard would make every metric of the run a
mixture nobody asked for, and the report could not tell.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.inputs.model_fingerprint import fingerprint_difference
from pr1_eval.records.run import RunRecord, task_entries
from pr1_eval.store.run_store import RunStore


def _fingerprint(record: RunRecord) -> dict[str, Any]:
    """The settings that must match for a rerun to resume an existing run."""
    return {
        "model": record.model.path,
        "k": record.k,
        "sampling": record.sampling,
        "decoding": record.decoding,
        "prompt_sha256": record.prompt.sha256 if record.prompt is not None else None,
        "shard": _shard_key(record.shard),
        "answer_policy": record.policy,
        "adaptive": _rule_key(record.adaptive),
    }


def _rule_key(section: dict[str, Any] | None) -> dict[str, Any] | None:
    """An adaptive run's rule, without what the run itself adds (samples drawn, settled sides)."""
    return None if not section else {k: v for k, v in section.items() if k not in ("samples_drawn", "settled")}


def _shard_key(section: dict[str, Any] | None) -> list[int] | None:
    return None if not section else [int(section["index"]), int(section["count"])]


def check_resumable(store: RunStore, new: RunRecord) -> RunRecord:
    """Refuse to append to a run made with other settings; keep its tasks, start time and training family
    (a rerun without ``--family`` does not take the run out of its job)."""
    old = store.read_run()
    if old.prompt is None or old.model.path is None:
        raise Pr1EvalError(f"{store.root} holds a run.json this version cannot resume (no model or prompt recorded); "
                           "pass a new --out")
    old_fp, new_fp = _fingerprint(old), _fingerprint(new)
    if old_fp != new_fp:
        diff = [key for key in new_fp if old_fp.get(key) != new_fp[key]]
        hint = f" (it was graded under --answer-policy {old.policy})" if "answer_policy" in diff else ""
        raise Pr1EvalError(f"{store.root} holds a run with different settings ({', '.join(diff)}){hint}; "
                           "pass a new --out, or rerun with the original settings to resume")
    _check_weights(store, old, new)
    tasks = task_entries(new.tasks)
    for name, info in old.tasks.items():
        newer = tasks.get(name)
        if newer and newer.data_hash != info.data_hash and newer.n_problems == info.n_problems:
            raise Pr1EvalError(f"task {name!r}: the data changed since this run started (hash differs); pass a new --out")
        tasks.setdefault(name, info)
    model = new.model if new.model.family is not None else dataclasses.replace(new.model, family=old.model.family)
    return dataclasses.replace(new, tasks=tasks, started_at=old.started_at or new.started_at, model=model)


def _check_weights(store: RunStore, old: RunRecord, new: RunRecord) -> None:
    """Same path, same weights and tokenizer: the model folder's fingerprint
    (:mod:`pr1_eval.inputs.model_fingerprint`) must not have changed since the run started. A run
    recorded before fingerprints existed resumes with a warning (nothing to compare with); the
    resumed run then records today's fingerprint, so its next resume is checked."""
    before, now = old.model.fingerprint, new.model.fingerprint
    if before is None and now is not None:
        print(f"warning: {store.root} was started by a pr1-eval that recorded no model fingerprint, so whether "
              f"{new.model.path} still holds the same weights cannot be checked; resuming", file=sys.stderr)
        return
    if before is None or now is None:
        return  # a hub id (its revision is compared with the path), or the folder is gone (check_model says so)
    difference = fingerprint_difference(before, now)
    if difference:
        raise Pr1EvalError(f"{store.root}: the weights or tokenizer in {new.model.path} changed since this run "
                           f"started ({difference}); resuming would mix two models in one run: pass a new --out, "
                           "or restore the original model files to resume")
