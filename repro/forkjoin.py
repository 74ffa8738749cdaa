"""The fork-join rollout for training: pr1-eval's protocol machine behind a raw engine call.

The protocol — when to fork, what each request may generate, which tokens are inserted, the block
limit, the response cut, the critical path — is :class:`pr1_eval.protocol.forkjoin.ForkJoinMachine`,
the machine evaluation drives too; nothing of it is repeated here. This module adds only what
training needs on top: the engine's raw output (vLLM-style ids that end with the stop token or the
EOS) is normalised by :meth:`Generation.from_raw`, the final EOS is kept in the response (the model
must learn to stop), and the loss mask is the machine's generated-token mask unless
``train_on_inserted_tokens`` (the official code trained on inserted tokens too).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

from pr1_eval.protocol.forkjoin import ForkJoinMachine, ForkJoinParams, Generation, run_async
from pr1_eval.protocol.paper_settings import (
    PAPER_MAX_BLOCKS,
    PAPER_MAX_NEW_TOKENS,
    PAPER_MAX_PATH_TOKENS,
    PAPER_PATH_TEMPERATURE,
    PAPER_PATHS,
)


@dataclass
class RawOutput:
    """One engine call's result as a server returns it: ids (a hit stop token or the EOS it stopped
    on included) and their log-probs."""

    token_ids: list[int]
    log_probs: list[float] | None = None


RawGenerate = Callable[[list[int], list[int], int, float | None], Awaitable[RawOutput]]
"""``generate(prompt_ids, stop_token_ids, max_tokens, temperature)`` — one engine request
(``temperature`` ``None``: the rollout's own)."""


@dataclass(frozen=True)
class ForkJoinConfig:
    """repro's fork-join knobs (``repro.forkjoin`` in a stage config): the protocol's, plus whether
    inserted tokens are trained on. Defaults are the paper's (:mod:`pr1_eval.protocol.paper_settings`):
    its paths, blocks and response budget, the response ends after the last block, paths at the
    official path temperature (``path_temperature``; ``None``: the rollout's) and cut at the official
    ``max_path_response_length`` (0: no cap), a second EOS inside a path or summary kept and closed
    (``secondary_eos``)."""

    n_paths: int = PAPER_PATHS
    max_blocks: int = PAPER_MAX_BLOCKS
    response_length: int = PAPER_MAX_NEW_TOKENS
    train_on_inserted_tokens: bool = False
    after_last_block: str = "end"
    path_temperature: float | None = PAPER_PATH_TEMPERATURE
    max_path_response_length: int = PAPER_MAX_PATH_TOKENS
    secondary_eos: str = "keep"

    def params(self) -> ForkJoinParams:
        return ForkJoinParams(
            self.n_paths, self.max_blocks, self.response_length, self.after_last_block, self.path_temperature,
            self.max_path_response_length, self.secondary_eos,
        )


@dataclass
class Trajectory:
    """The response: ids, loss mask, log-probs, and the machine's counters for the logs."""

    ids: list[int]
    mask: list[int]
    log_probs: list[float]
    generated_mask: list[bool]
    blocks: int = 0
    engine_calls: int = 0
    inserted_tokens: int = 0
    engine_closed_tags: int = 0
    critical_path_tokens: int = 0
    finish: str = ""
    path_spans: list[tuple[int, int, int]] = field(default_factory=list)
    """``(block, start, end)`` of every path request's tokens in the response (:mod:`repro.spans`)."""


class ForkJoinRollout:
    """Run the protocol for one prompt with any raw ``generate`` coroutine (vLLM server, a script)."""

    def __init__(
        self,
        tag_ids: Mapping[str, int],
        eos_ids: Iterable[int],
        newline_ids: list[int],
        config: ForkJoinConfig,
        generate: RawGenerate,
        primary_eos_id: int | None = None,
    ) -> None:
        """``eos_ids``: every EOS id (tokenizer and generation config); ``primary_eos_id``: the
        tokenizer's own, the only one the official loop recognises inside a path or summary (the
        others are kept there and closed, see ``secondary_eos``); ``None`` treats all alike."""
        self.tag_ids = dict(tag_ids)
        self.eos = frozenset(int(i) for i in eos_ids)
        self.secondary_eos = self.eos - {int(primary_eos_id)} if primary_eos_id is not None else frozenset()
        self.newline = list(newline_ids)
        self.config = config
        self._generate = generate

    async def _normalised(self, prompt: list[int], stops: list[int], max_tokens: int,
                          temperature: float | None) -> Generation:
        raw = await self._generate(prompt, stops, max_tokens, temperature)
        return Generation.from_raw(raw.token_ids, raw.log_probs, stops, self.eos)

    async def run(self, prompt_ids: list[int]) -> Trajectory:
        """Build one response; never longer than ``response_length`` tokens."""
        machine = ForkJoinMachine(
            self.tag_ids, self.newline, self.config.params(), keep_final_eos=True, secondary_eos_ids=self.secondary_eos
        )
        await run_async(machine, prompt_ids, self._normalised)
        trained_inserted = self.config.train_on_inserted_tokens
        return Trajectory(
            ids=list(machine.tokens),
            mask=[1 if generated or trained_inserted else 0 for generated in machine.generated_mask],
            log_probs=list(machine.logprobs),
            generated_mask=list(machine.generated_mask),
            blocks=len(machine.blocks),
            engine_calls=machine.steps,
            inserted_tokens=machine.inserted,
            engine_closed_tags=machine.repairs,
            critical_path_tokens=machine.critical_path_tokens(),
            finish=machine.finish,
            path_spans=[
                (b, start, min(end, len(machine.tokens)))
                for b, block in enumerate(machine.blocks)
                for start, end in block.paths
                if start < len(machine.tokens)
            ],
        )
