"""One scored rollout of a repro RL job → the :class:`SampleRecord` pr1-eval stores for it.

Why from the reward manager's input: VERL 0.9.1's V1 trainer scores each trajectory on its own,
in one of several reward-loop worker processes (``AgentLoopWorker._compute_score`` →
``RewardLoopWorker.compute_score`` → ``run_single`` with one row), and that row is the only place
where the response's token ids, the data row (``data_source``, ``extra_info``), the group
(``uid`` and ``session_id``, the rollout's index among the prompt's ``rollout.n``), the step
(``global_steps``) and the reward's components meet. Everything here is read from it:

* task = ``data_source``; problem id, problem and split from ``extra_info`` as
  :func:`repro.data.rl_row` writes it (``id``, ``problem``, ``split``: 'test' for the
  validation set, so a row tells whether it is validation); gold = ``reward_model.ground_truth``;
* token counts from the tensors (prompt length; response length = its attention mask), cut =
  the response used the whole budget (``rollout.response_length``), VERL's own clip rule;
* the response decoded with the tags kept (the tag-keeping decode the reward itself read);
* reward = the score, ``correct`` / ``correct_paper`` = the reward's math-verify and paper
  verdicts (``acc``, ``acc_paper``), the other components (has-parallel, the format checks,
  whether the tiered reward applied, the step) kept as ``reward_info``;
* fork-join statistics (engine calls, inserted tags, critical path) from the agent loop's
  ``extra_fields`` when the fork-join loop produced the rollout.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pr1_eval.grading.annotate import annotate_structure, token_offsets
from pr1_eval.protocol.decode import decode_keeping_tags
from pr1_eval.records.sample import SampleRecord

VALIDATION_SPLITS = frozenset({"test", "val", "validation"})
#: Reward keys stored in their own fields; every other key goes to ``reward_info``.
OWN_FIELDS = ("score", "acc", "acc_paper", "grade_ok")


@dataclass
class Rollout:
    """One rollout on its way to a step's run: where it belongs, and its record."""

    kind: str  # 'train' | 'validation'
    step: int
    uid: str  # the prompt's group in this step
    session: int | None  # index among the group's rollouts (None: not given, the writer numbers it)
    record: SampleRecord


def _item(batch: dict[str, Any], key: str, default: Any = None) -> Any:
    values = batch.get(key)
    return default if values is None else values[-1]


def kind_of(extra_info: dict[str, Any]) -> str:
    """'validation' for a row of the validation set (``extra_info.split``), else 'train'."""
    return "validation" if str(extra_info.get("split", "")).lower() in VALIDATION_SPLITS else "train"


def problem_id_of(extra_info: dict[str, Any], prompt_text: str) -> str:
    """The data's ``id``, else its ``index``, else a hash of the prompt (stable across steps)."""
    for key in ("id", "index"):
        if extra_info.get(key) is not None:
            return str(extra_info[key])
    return "prompt-" + hashlib.sha256(prompt_text.encode()).hexdigest()[:12]


def _fork_join_stats(record: SampleRecord, extra: Any) -> None:
    """The fork-join loop's counts (its ``extra_fields``), when it produced the rollout."""
    fields = dict(extra) if isinstance(extra, dict) else {}

    def get(key: str) -> int | None:
        return None if fields.get(key) is None else int(fields[key])

    record.engine_calls = get("pr1_engine_calls")
    record.engine_inserted_tokens = get("pr1_inserted_tokens")
    record.critical_path_tokens = get("pr1_critical_path_tokens")


def rollout_of(data: Any, result: dict[str, Any], tokenizer: Any, response_budget: int | None) -> Rollout | None:
    """The :class:`Rollout` of the one-row ``data`` ``run_single`` scored (``result`` is its return),
    or None for a row that names no step (scored outside a trainer: offline re-scoring, tests)."""
    batch = data.non_tensor_batch
    raw = getattr(tokenizer, "_tokenizer", tokenizer)  # the tokenizer itself (token_offsets calls it)
    step = _item(batch, "global_steps")
    if step is None or int(step) < 0:
        return None
    item = data[-1]
    responses = item.batch["responses"]
    n_response = int(item.batch["attention_mask"][-responses.shape[-1]:].sum())
    prompt_ids = item.batch["prompts"]
    n_prompt = int(item.batch["attention_mask"][: prompt_ids.shape[-1]].sum())
    response = decode_keeping_tags(raw, responses[:n_response])
    prompt_text = decode_keeping_tags(raw, prompt_ids[prompt_ids.shape[-1] - n_prompt:])
    info = dict(_item(batch, "extra_info") or {})
    extra = dict(result.get("reward_extra_info") or {})
    task = str(_item(batch, "data_source", "unknown"))
    grade_ok = float(extra.get("grade_ok", 1.0)) > 0
    record = SampleRecord(
        task=task, problem_id=problem_id_of(info, prompt_text), sample_idx=0,
        prompt_hash=hashlib.sha256(prompt_text.encode()).hexdigest()[:16], problem=str(info.get("problem") or ""),
        response=response, finish_reason="length" if response_budget and n_response >= response_budget else "stop",
        n_prompt_tokens=n_prompt, n_response_tokens=n_response,
        gold=str((_item(batch, "reward_model") or {}).get("ground_truth", "")),
        correct=bool(extra["acc"]) if grade_ok and "acc" in extra else None,
        correct_paper=bool(extra["acc_paper"]) if "acc_paper" in extra else None,
        grade_status="ok" if grade_ok else "error",
        reward=float(result["reward_score"]), reward_acc=bool(extra["acc"]) if "acc" in extra else None,
        reward_info=json.dumps({k: v for k, v in sorted(extra.items()) if k not in OWN_FIELDS}, default=str),
    )
    _fork_join_stats(record, _item(batch, "tool_extra_fields"))
    annotate_structure(record, token_offsets(raw, response))
    session = _item(batch, "session_id")
    uid = _item(batch, "uid")
    return Rollout(kind_of(info), int(step), str(uid if uid is not None else record.problem_id),
                   None if session is None else int(session), record)
