"""The fork-join rollout as a VERL agent loop (``agent_name: pr1_forkjoin``).

Registered with VERL's ``@register`` decorator when this module is imported; every repro RL stage
imports it in each VERL process through ``actor_rollout_ref.model.external_lib`` (VERL's model
config imports that module in the agent-loop workers before any loop is instantiated). Knobs live
under the stage config's ``repro.forkjoin`` section (``n_paths``, ``max_blocks``,
``after_last_block``, ``train_on_inserted_tokens``, ``path_temperature``,
``max_path_response_length``, ``secondary_eos``); the response budget is
``actor_rollout_ref.rollout.response_length``.

The protocol is pr1-eval's step machine (:mod:`pr1_eval.protocol.forkjoin`, driven by
:class:`repro.forkjoin.ForkJoinRollout`), with the tag ids and the EOS set from
:mod:`pr1_eval.protocol`; this class adapts it to VERL: the prompt is built with VERL's
continuous-token builder, each engine call goes through the server manager with one request id
per trajectory (sticky routing → prefix-cache hits), and the result is an ``AgentLoopOutput`` whose
``response_mask`` is 0 on engine-inserted tokens.

Weight versions: every ``server_manager.generate`` returns ``min_global_steps`` /
``max_global_steps`` (the policy versions that produced it). VERL's default (V1) trainer stores
them per trajectory and casts them to ``int`` after the first actor update
(``trainer_base._compute_metrics``), so a loop that drops them crashes step 1. A fork-join
trajectory is many calls: it reports the smallest ``min`` and the largest ``max`` over its calls.
"""

from __future__ import annotations

import itertools
import time
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from pr1_eval.protocol.eos import eos_token_ids, load_generation_config
from pr1_eval.protocol.paper_settings import (
    PAPER_MAX_BLOCKS,
    PAPER_MAX_PATH_TOKENS,
    PAPER_PATH_TEMPERATURE,
    PAPER_PATHS,
)
from pr1_eval.protocol.tags import resolve_tag_ids
from repro.forkjoin import ForkJoinConfig, ForkJoinRollout, RawOutput, Trajectory
from repro.spans import SPANS_KEY

AGENT_NAME = "pr1_forkjoin"


def _optional_float(value: Any) -> float | None:
    """A config float where ``null`` or ``"run"`` means *the rollout's own* (``None``)."""
    return None if value is None or value == "run" else float(value)


class WeightVersions:
    """The policy versions (VERL global steps) seen across the calls of one trajectory."""

    def __init__(self) -> None:
        self.min: int | None = None
        self.max: int | None = None

    def record(self, extra_fields: dict[str, Any]) -> None:
        low, high = extra_fields.get("min_global_steps"), extra_fields.get("max_global_steps")
        if low is not None:
            self.min = int(low) if self.min is None else min(self.min, int(low))
        if high is not None:
            self.max = int(high) if self.max is None else max(self.max, int(high))

    def fields(self) -> dict[str, Any]:
        return {"min_global_steps": self.min, "max_global_steps": self.max}


def trajectory_key(kwargs: dict[str, Any]) -> str:
    """A trajectory's name that is the same on every run: ``det-<index>-<session>``, its prompt's data
    index (``extra_info.index``) and its sample number among the prompt's ``n`` (``session_id``, which
    VERL 0.9.1's V1 worker passes to every agent loop). VERL's own ``det-<priority>`` cannot serve: the
    V1 trainer's transfer-queue path never sets ``priority``, so every request of a step would be
    ``det-0``. The step is not in the name: the server adds the weight version it holds."""
    return f"det-{int(kwargs.get('index', 0))}-{int(kwargs.get('session_id', 0))}"


@register(AGENT_NAME)
class ForkJoinAgentLoop(AgentLoopBase):
    """Parallel-R1's fork-join rollout: paths are separate requests that never see each other."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        options = dict(self.config.get("repro", {}).get("forkjoin", {}) or {})
        self.fj_config = ForkJoinConfig(
            n_paths=int(options.get("n_paths", PAPER_PATHS)),
            max_blocks=int(options.get("max_blocks", PAPER_MAX_BLOCKS)),
            response_length=int(self.rollout_config.response_length),
            train_on_inserted_tokens=bool(options.get("train_on_inserted_tokens", False)),
            after_last_block=str(options.get("after_last_block", "end")),
            path_temperature=_optional_float(options.get("path_temperature", PAPER_PATH_TEMPERATURE)),
            max_path_response_length=int(options.get("max_path_response_length", PAPER_MAX_PATH_TOKENS)),
            secondary_eos=str(options.get("secondary_eos", "keep")),
        )
        self.tag_ids = resolve_tag_ids(self.tokenizer)
        tokenizer: Any = self.tokenizer
        self.newline_ids = list(tokenizer.encode("\n", add_special_tokens=False))
        model_path = self.config.actor_rollout_ref.model.get("path")
        self.eos_ids = set(eos_token_ids(self.tokenizer, load_generation_config(model_path)))

    def _cap_text_prompt_length(self, prompt_ids: list[int]) -> list[int]:
        """Refuse a prompt longer than ``rollout.prompt_length`` instead of VERL's silent
        left-truncation (the rollout would start mid-problem; the official loop keeps whole prompts)."""
        limit = int(self.rollout_config.prompt_length)
        if len(prompt_ids) > limit:
            raise ValueError(
                f"prompt of {len(prompt_ids)} tokens exceeds rollout.prompt_length={limit}; keep "
                "data.filter_overlong_prompts=true (repro's configs do) so VERL drops such prompts when it loads the data"
            )
        return prompt_ids

    def _generator(self, sampling_params: dict[str, Any], versions: WeightVersions, key: str | None = None) -> Any:
        """A ``generate(prompt, stops, max_tokens)`` bound to one trajectory's request id.

        Under ``rollout.full_determinism`` the id is :func:`trajectory_key` (given as ``key``) and each
        call adds its ordinal within the trajectory. The ordinal is deterministic: the machine issues a
        block's path requests through one ``asyncio.gather``, whose tasks start in argument order, and
        each call takes its number before its first ``await``."""
        deterministic = bool(getattr(self.rollout_config, "full_determinism", False))
        request_id = key if deterministic and key else uuid4().hex
        counter = itertools.count()

        async def generate(prompt_ids: list[int], stops: list[int], max_tokens: int,
                           temperature: float | None) -> RawOutput:
            params = dict(sampling_params)
            params["max_tokens"] = max_tokens
            if temperature is not None:  # path requests: the official rollout samples them at 1.0
                params["temperature"] = temperature
            if stops:
                params["stop_token_ids"] = list(stops)
            # With full_determinism VERL hands the id to vLLM unchanged, and concurrent paths need distinct ids.
            rid = f"{request_id}-{next(counter)}" if deterministic else request_id
            out = await self.server_manager.generate(
                request_id=rid, prompt_ids=list(prompt_ids), sampling_params=params
            )
            versions.record(dict(getattr(out, "extra_fields", None) or {}))
            return RawOutput(list(out.token_ids), list(out.log_probs) if out.log_probs else None)

        return generate

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        messages = list(kwargs["raw_prompt"])
        prompt_ids = await self.ct_build_initial_tokens(messages)
        start = time.perf_counter()
        versions = WeightVersions()
        rollout = ForkJoinRollout(
            self.tag_ids, self.eos_ids, self.newline_ids, self.fj_config,
            self._generator(sampling_params, versions, trajectory_key(kwargs)),
            primary_eos_id=getattr(self.tokenizer, "eos_token_id", None),
        )
        traj = await rollout.run(list(prompt_ids))
        want_logprobs = bool(sampling_params.get("logprobs"))
        return self._output(prompt_ids, traj, time.perf_counter() - start, want_logprobs, versions)

    def _output(
        self, prompt_ids: list[int], traj: Trajectory, seconds: float, want_logprobs: bool, versions: WeightVersions
    ) -> AgentLoopOutput:
        stats = {
            "pr1_blocks": traj.blocks,
            "pr1_engine_calls": traj.engine_calls,
            "pr1_inserted_tokens": traj.inserted_tokens,
            "pr1_engine_closed_tags": traj.engine_closed_tags,
            "pr1_critical_path_tokens": traj.critical_path_tokens,
        }
        return AgentLoopOutput(
            prompt_ids=list(prompt_ids),
            response_ids=traj.ids,
            response_mask=traj.mask,
            response_logprobs=traj.log_probs if want_logprobs else None,
            num_turns=2,
            metrics=AgentLoopMetrics(generate_sequences=seconds),
            extra_fields={
                **stats, **versions.fields(), "turn_scores": [], "tool_rewards": [],
                SPANS_KEY: [list(span) for span in traj.path_spans],
            },
        )
