"""The fork-join rollout as a VERL agent loop (``agent_name: pr1_forkjoin``).

Registered with VERL's ``@register`` decorator when this module is imported; every repro RL stage
imports it in each VERL process through ``actor_rollout_ref.model.external_lib`` (VERL's model
config imports that module in the agent-loop workers before any loop is instantiated). Knobs live
under the stage config's ``repro.forkjoin`` section (``n_paths``, ``max_blocks``,
``train_on_inserted_tokens``); the response budget is ``actor_rollout_ref.rollout.response_length``.

The protocol itself is :class:`repro.forkjoin.ForkJoinRollout`; this class adapts it to VERL: the
prompt is built with VERL's continuous-token builder, each engine call goes through the server
manager with one request id per trajectory (sticky routing → prefix-cache hits), and the result is
an ``AgentLoopOutput`` whose ``response_mask`` is 0 on engine-inserted tokens.
"""

from __future__ import annotations

import itertools
import time
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from repro.forkjoin import ForkJoinConfig, ForkJoinRollout, Generation, Trajectory

AGENT_NAME = "pr1_forkjoin"


def _tag_ids(tokenizer: Any) -> dict[str, int]:
    from pr1_eval.structured import resolve_tag_ids

    return resolve_tag_ids(tokenizer)


def eos_ids(tokenizer: Any, generation_config: Any = None) -> set[int]:
    """Every id that ends a response: the tokenizer's EOS and the generation config's EOS list."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    extra = getattr(generation_config, "eos_token_id", None) if generation_config is not None else None
    ids |= set(extra if isinstance(extra, list) else [extra] if extra is not None else [])
    return {int(i) for i in ids}


def _generation_config(model_path: str | None) -> Any:
    """The checkpoint's generation config (its EOS list is what vLLM stops on), or None."""
    if not model_path:
        return None
    try:
        from transformers import GenerationConfig

        return GenerationConfig.from_pretrained(model_path)
    except (OSError, ValueError):
        return None


@register(AGENT_NAME)
class ForkJoinAgentLoop(AgentLoopBase):
    """Parallel-R1's fork-join rollout: paths are separate requests that never see each other."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        options = dict(self.config.get("repro", {}).get("forkjoin", {}) or {})
        self.fj_config = ForkJoinConfig(
            n_paths=int(options.get("n_paths", 2)),
            max_blocks=int(options.get("max_blocks", 4)),
            response_length=int(self.rollout_config.response_length),
            train_on_inserted_tokens=bool(options.get("train_on_inserted_tokens", False)),
        )
        self.tag_ids = _tag_ids(self.tokenizer)
        tokenizer: Any = self.tokenizer
        self.newline_ids = list(tokenizer.encode("\n", add_special_tokens=False))
        self.eos_ids = eos_ids(self.tokenizer, _generation_config(self.config.actor_rollout_ref.model.get("path")))

    def _generator(self, sampling_params: dict[str, Any]) -> Any:
        """A ``generate(prompt, stops, max_tokens)`` bound to one trajectory's request id."""
        request_id = uuid4().hex
        counter = itertools.count()
        deterministic = bool(getattr(self.rollout_config, "full_determinism", False))

        async def generate(prompt_ids: list[int], stops: list[int], max_tokens: int) -> Generation:
            params = dict(sampling_params)
            params["max_tokens"] = max_tokens
            if stops:
                params["stop_token_ids"] = list(stops)
            # With full_determinism VERL hands the id to vLLM unchanged, and concurrent paths need distinct ids.
            rid = f"{request_id}-{next(counter)}" if deterministic else request_id
            out = await self.server_manager.generate(
                request_id=rid, prompt_ids=list(prompt_ids), sampling_params=params
            )
            return Generation(list(out.token_ids), list(out.log_probs) if out.log_probs else None)

        return generate

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        messages = list(kwargs["raw_prompt"])
        prompt_ids = await self.ct_build_initial_tokens(messages)
        start = time.perf_counter()
        rollout = ForkJoinRollout(
            self.tag_ids,
            self.eos_ids,
            self.newline_ids,
            self.fj_config,
            self._generator(sampling_params),
        )
        traj = await rollout.run(list(prompt_ids))
        return self._output(prompt_ids, traj, time.perf_counter() - start, bool(sampling_params.get("logprobs")))

    def _output(self, prompt_ids: list[int], traj: Trajectory, seconds: float, want_logprobs: bool) -> AgentLoopOutput:
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
            extra_fields={**stats, "turn_scores": [], "tool_rewards": []},
        )
