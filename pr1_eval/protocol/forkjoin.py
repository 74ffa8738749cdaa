"""The Parallel-R1 fork-join rollout as one engine-agnostic step machine.

Evaluation (batched waves over any :class:`~pr1_eval.engines.base.Engine`) and repro's RL rollout
(VERL's asynchronous agent loop over a vLLM server) both drive :class:`ForkJoinMachine`: given what
has been generated so far it names the next request (main line, the paths of a block, or the
summary), its budget and stop tokens; fed the engine's output it appends generated and inserted
tokens, records which is which, and keeps the critical path. Drivers only move tokens.

The protocol is the paper's rollout (the official ``parallel_thinking_loop_v3``):

* **main line** until ``<Parallel>`` (a stop token while blocks remain), EOS or the budget;
* **paths**: ``paths`` requests on ``context + <Path>`` stopping at ``</Path>``; a path never sees
  a sibling. As in the official loop, every path request is sampled at **temperature 1.0**
  whatever the run's temperature (``path_temperature``; ``None`` uses the run's, a deviation), and
  each path is capped at ``max_path_tokens`` (the official ``max_path_response_length``, 4096 in the
  RL scripts; 0 = no cap) and then closed with ``</Path>``. A path that ends at the tokenizer's EOS
  has it replaced by ``</Path>``; one cut by its cap or the budget gets ``</Path>`` appended;
* **a second EOS** (an id the generation config lists beside the tokenizer's, e.g. Qwen3's
  ``<|im_end|>`` next to ``<|endoftext|>``) inside a path or summary: the official loop stops
  there (vLLM stops on every EOS) but only recognises the tokenizer's own id, so the second one is
  **kept and the closing tag appended** (``secondary_eos="keep"``, the default, done by making
  those ids stop tokens of path and summary requests); ``"replace"`` treats it like the first;
* **join**: the paths, then ``</Parallel>\\n<Summary>``; the **summary** runs to ``</Summary>``
  (EOS replaced, a cut one closed the same way), at the run's temperature; then the main line resumes;
* **at most ``max_blocks`` blocks**: after the last block's ``</Summary>`` the response ends
  (``after_last_block="end"``, finish reason ``block_limit``), as the official rollout stops its
  loop there (with ``max_blocks=0`` the response ends before the first ``<Parallel>``; the official
  code reads 0 as *no cap*, a defect not copied). ``after_last_block="continue"`` resumes the main
  line without a fork point instead (later blocks are then written inline, their paths seeing each
  other): an explicit deviation;
* **one response budget** (``budget``, the paper's 3000): every request may use what is left of
  it (a path at most ``max_path_tokens`` of that), and the whole response is then cut at the
  budget. Nothing is ever appended past the cap;
* **tags the model writes inside a path** (a stray ``<Parallel>`` or ``<Path>``) are kept as text
  of that path, as in the official loop; the path's span is the request that produced it
  (:attr:`ForkJoinMachine.blocks`). The official trainer builds its structured positions and mask
  from those spans; repro's rollout hands them on and its structured actor uses them when its batch
  carries them (``repro.spans``), while :mod:`pr1_eval.protocol.mask` re-parses the tokens and reads
  everything from the stray tag on as causal — the same result on well-formed blocks only.

Tokens the machine writes itself (``<Path>``, ``</Parallel>``, the newline, ``<Summary>``, and
closing tags that replace EOS or end a cut-off path/summary) are *inserted*: ``generated_mask`` is
False there and their log-prob is :data:`INSERTED_LOGPROB` (0.0: the protocol chooses them with
probability 1). ``repairs`` counts only the closing tags written for the model.

The critical path is what a parallel engine waits for: main-line tokens, for every block the
longest path (its tags included), the join and the summary; i.e. the response length minus every
shorter sibling path, computed on the final (cut) response.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.paper_settings import (
    PAPER_AFTER_LAST_BLOCK,
    PAPER_MAX_BLOCKS,
    PAPER_MAX_NEW_TOKENS,
    PAPER_MAX_PATH_TOKENS,
    PAPER_PATH_TEMPERATURE,
    PAPER_PATHS,
    PAPER_SECONDARY_EOS,
)

MAIN, PATHS, SUMMARY = "main", "paths", "summary"
AFTER_LAST_BLOCK = (PAPER_AFTER_LAST_BLOCK, "continue")
"""What follows the last allowed block's summary: the response ends (the paper's), or it continues."""
SECONDARY_EOS = (PAPER_SECONDARY_EOS, "replace")
"""What a path or summary does with a second EOS id: the official loop keeps it (then the closing tag)."""
ENGINE_GAVE_UP = ("abort", "error")
"""Finish reasons of a request the engine abandoned (vLLM's abort/error): the response ends there."""
INSERTED_LOGPROB = 0.0
"""Log-prob recorded for inserted tokens: the protocol writes them with probability 1."""
UNKNOWN_LOGPROB = math.nan
"""Log-prob of a generated token when the engine recorded none."""


@dataclass(frozen=True)
class ForkJoinParams:
    """The protocol's knobs. Defaults are the paper's (:mod:`pr1_eval.protocol.paper_settings`):
    its paths per block, blocks, response budget, path temperature and per-path cap; the response
    ends after the last block's summary, and a second EOS is kept inside a path or summary (see
    the module docstring)."""

    paths: int = PAPER_PATHS
    max_blocks: int = PAPER_MAX_BLOCKS
    budget: int = PAPER_MAX_NEW_TOKENS
    after_last_block: str = PAPER_AFTER_LAST_BLOCK
    path_temperature: float | None = PAPER_PATH_TEMPERATURE
    max_path_tokens: int = PAPER_MAX_PATH_TOKENS
    secondary_eos: str = PAPER_SECONDARY_EOS

    def __post_init__(self) -> None:
        if self.paths < 1:
            raise Pr1EvalError(f"--paths must be at least 1, got {self.paths}")
        if self.max_blocks < 0:
            raise Pr1EvalError(f"--max-blocks must be 0 or more, got {self.max_blocks}")
        if self.budget < 0:
            raise Pr1EvalError(f"the response budget must be 0 or more, got {self.budget}")
        if self.after_last_block not in AFTER_LAST_BLOCK:
            raise Pr1EvalError(
                f"--after-last-block must be one of {', '.join(AFTER_LAST_BLOCK)}, got {self.after_last_block!r}"
            )
        if self.path_temperature is not None and self.path_temperature < 0:
            raise Pr1EvalError(f"--path-temperature must be 0 or more (or 'run'), got {self.path_temperature}")
        if self.max_path_tokens < 0:
            raise Pr1EvalError(f"--max-path-tokens must be 0 (no cap) or more, got {self.max_path_tokens}")
        if self.secondary_eos not in SECONDARY_EOS:
            raise Pr1EvalError(
                f"--secondary-eos must be one of {', '.join(SECONDARY_EOS)}, got {self.secondary_eos!r}"
            )

    def describe(self) -> dict[str, Any]:
        """Every protocol parameter, for ``run.json`` and training logs."""
        return {
            "protocol": "parallel-r1-forkjoin",
            "paths": self.paths,
            "max_blocks": self.max_blocks,
            "response_budget": self.budget,
            "after_last_block": self.after_last_block,
            "path_temperature": "run" if self.path_temperature is None else self.path_temperature,
            "max_path_tokens": self.max_path_tokens,
            "path_budget": "min(remaining response budget - 1, max_path_tokens; 0 = no cap), then </Path>; "
            "the response is cut at the budget",
            "eos_in_path_or_summary": "the tokenizer's EOS replaced by the closing tag",
            "secondary_eos": self.secondary_eos,
            "join": "</Parallel>\\n<Summary>",
            "inserted_logprob": INSERTED_LOGPROB,
        }


@dataclass(frozen=True)
class StepRequest:
    """What the machine wants generated next.

    The prompt is ``prompt_ids + prefix`` (``prefix`` = the response so far plus any protocol
    token the generation continues, e.g. ``<Path>``); ``n`` independent samples, each at most
    ``max_tokens`` long, stopping at EOS or at one of ``stop_ids`` (kept in the output), sampled at
    ``temperature`` (``None``: the run's).
    """

    kind: str
    block: int
    prefix: tuple[int, ...]
    n: int
    max_tokens: int
    stop_ids: tuple[int, ...]
    temperature: float | None = None


@dataclass(frozen=True)
class Generation:
    """One engine sample, normalised: ``token_ids`` without EOS (a hit stop token is the last id),
    ``finish`` one of ``stop | eos | length`` (or ``abort | error`` when the engine gave the request
    up), and the EOS id the model wrote (when known) with its
    log-prob, so a trainer can keep it at the end of the response."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...] | None
    finish: str
    eos_id: int | None = None
    eos_logprob: float | None = None

    @classmethod
    def from_raw(
        cls, token_ids: Sequence[int], logprobs: Sequence[float] | None, stop_ids: Iterable[int], eos_ids: Iterable[int]
    ) -> Generation:
        """From vLLM-style output, whose ids end with the stop token or the EOS it stopped on.

        A sequence that ends with neither stopped at its budget (or at the model length)."""
        ids = [int(t) for t in token_ids]
        lps = [float(x) for x in logprobs] if logprobs else None
        if ids and ids[-1] in set(stop_ids):
            return cls(tuple(ids), tuple(lps) if lps is not None else None, "stop")
        if ids and ids[-1] in set(eos_ids):
            eos, eos_lp = ids.pop(), (lps.pop() if lps else None)
            return cls(tuple(ids), tuple(lps) if lps is not None else None, "eos", eos, eos_lp)
        return cls(tuple(ids), tuple(lps) if lps is not None else None, "length")


@dataclass
class _Block:
    """Token spans ``[start, end)`` of the paths of one block, in the response."""

    paths: list[tuple[int, int]] = field(default_factory=list)


class ForkJoinMachine:
    """One response under the fork-join protocol (see the module docstring).

    ``request`` is the next :class:`StepRequest` (``None`` once :attr:`done`); :meth:`feed` takes
    its ``n`` generations. ``keep_final_eos`` appends the EOS that ends the main line as a
    generated token (a trainer must learn to stop; an evaluation record holds no EOS).
    ``secondary_eos_ids``: the EOS ids other than the tokenizer's own (see ``secondary_eos``).
    """

    def __init__(
        self,
        tag_ids: Mapping[str, int],
        newline_ids: Sequence[int],
        params: ForkJoinParams,
        *,
        keep_final_eos: bool = False,
        secondary_eos_ids: Iterable[int] = (),
    ) -> None:
        self.tags = {tag: int(tag_ids[tag]) for tag in T.ALL_TAGS}
        kept = params.secondary_eos == "keep"
        self._inner_stops = tuple(sorted(int(i) for i in secondary_eos_ids)) if kept else ()
        self.join = (self.tags[T.PARALLEL_CLOSE], *(int(i) for i in newline_ids), self.tags[T.SUMMARY_OPEN])
        self.params = params
        self.keep_final_eos = keep_final_eos
        self.tokens: list[int] = []
        self.generated_mask: list[bool] = []
        self.logprobs: list[float] = []
        self.blocks: list[_Block] = []
        self.steps = 0
        self.repairs = 0
        self.engine_logprobs = False
        self.finish = ""
        self.request: StepRequest | None = None
        self._state = MAIN
        self._advance()

    # --------------------------------------------------------------- public
    @property
    def done(self) -> bool:
        return self.request is None

    @property
    def remaining(self) -> int:
        return self.params.budget - len(self.tokens)

    @property
    def inserted(self) -> int:
        return self.generated_mask.count(False)

    def feed(self, generations: Sequence[Generation]) -> None:
        """The engine's answer to :attr:`request` (``request.n`` generations, in order)."""
        request = self.request
        if request is None:
            raise RuntimeError("feed() on a finished fork-join machine")
        if len(generations) != request.n:
            raise RuntimeError(f"{request.kind} request wanted {request.n} generations, got {len(generations)}")
        self.steps += 1
        gave_up = next((g for g in generations if g.finish in ENGINE_GAVE_UP), None)
        if gave_up is not None:  # a partial response: keep what the main line / summary got, then stop
            if request.kind != PATHS:
                self._add(gave_up.token_ids, gave_up.logprobs, True)
            self._end(gave_up.finish)
        else:
            {MAIN: self._feed_main, PATHS: self._feed_paths, SUMMARY: self._feed_summary}[request.kind](generations)
        self._advance()

    def critical_path_tokens(self) -> int:
        """Response length minus the tokens of every shorter sibling path (on the cut response)."""
        hidden = 0
        for block in self.blocks:
            lengths = [max(0, min(end, len(self.tokens)) - start) for start, end in block.paths]
            if lengths:
                hidden += sum(lengths) - max(lengths)
        return len(self.tokens) - hidden

    # ------------------------------------------------------------- building
    def _add(self, tokens: Sequence[int], logprobs: Sequence[float] | None, generated: bool) -> None:
        self.tokens.extend(int(t) for t in tokens)
        self.generated_mask.extend([generated] * len(tokens))
        if not generated:
            self.logprobs.extend([INSERTED_LOGPROB] * len(tokens))
        elif logprobs is not None and len(logprobs) == len(tokens):
            self.engine_logprobs = True
            self.logprobs.extend(float(x) for x in logprobs)
        else:
            self.logprobs.extend([UNKNOWN_LOGPROB] * len(tokens))

    def _close(self, g: Generation, closing_tag: int) -> None:
        """A path or summary body; the protocol writes the closing tag when the model did not
        (EOS replaced, budget cut closed, a second EOS kept and closed)."""
        self._add(g.token_ids, g.logprobs, True)
        if g.finish != "stop" or not g.token_ids or g.token_ids[-1] != closing_tag:
            self._add([closing_tag], None, False)
            self.repairs += 1

    def _feed_main(self, generations: Sequence[Generation]) -> None:
        g = generations[0]
        self._add(g.token_ids, g.logprobs, True)
        forked = g.finish == "stop" and bool(g.token_ids) and g.token_ids[-1] == self.tags[T.PARALLEL_OPEN]
        if forked and len(self.blocks) >= self.params.max_blocks:  # a block past the cap (max_blocks=0)
            del self.tokens[-1], self.generated_mask[-1], self.logprobs[-1]
            self._end("block_limit")
        elif forked:
            self._state = PATHS
        elif g.finish == "eos":
            if self.keep_final_eos and g.eos_id is not None:
                self._add([g.eos_id], [g.eos_logprob] if g.eos_logprob is not None else None, True)
            self._end("eos")
        else:
            self._end("length")

    def _feed_paths(self, generations: Sequence[Generation]) -> None:
        block = _Block()
        for g in generations:
            start = len(self.tokens)
            self._add([self.tags[T.PATH_OPEN]], None, False)
            self._close(g, self.tags[T.PATH_CLOSE])
            block.paths.append((start, len(self.tokens)))
        self.blocks.append(block)
        self._add(self.join, None, False)
        self._state = SUMMARY

    def _feed_summary(self, generations: Sequence[Generation]) -> None:
        self._close(generations[0], self.tags[T.SUMMARY_CLOSE])
        if len(self.blocks) >= self.params.max_blocks and self.params.after_last_block == "end":
            self._end("block_limit")
        else:
            self._state = MAIN

    def _end(self, reason: str) -> None:
        self._state, self.finish = "done", reason

    # ------------------------------------------------------------ deciding
    def _advance(self) -> None:
        """Cut at the budget, then name the next request (or finish)."""
        if len(self.tokens) >= self.params.budget and self._state != "done":
            self._end("length")
        if len(self.tokens) > self.params.budget:
            n = self.params.budget
            del self.tokens[n:], self.generated_mask[n:], self.logprobs[n:]
            self.finish = "length"
        if self._state == PATHS and self.remaining <= 1:  # only <Path> fits: the cut leaves it open
            self._add([self.tags[T.PATH_OPEN]], None, False)
            self._end("length")
        self.request = None if self._state == "done" else self._next_request()

    def _next_request(self) -> StepRequest:
        blocks = len(self.blocks)
        if self._state == PATHS:
            prefix = (*self.tokens, self.tags[T.PATH_OPEN])
            budget = self.remaining - 1
            if self.params.max_path_tokens:
                budget = min(budget, self.params.max_path_tokens)
            stops = (self.tags[T.PATH_CLOSE], *self._inner_stops)
            return StepRequest(PATHS, blocks, prefix, self.params.paths, budget, stops, self.params.path_temperature)
        if self._state == SUMMARY:
            stops = (self.tags[T.SUMMARY_CLOSE], *self._inner_stops)
            return StepRequest(SUMMARY, blocks - 1, tuple(self.tokens), 1, self.remaining, stops)
        # under "end" the main line always stops at <Parallel> (a block past the cap ends the
        # response); under "continue" it stops only while blocks remain
        may_fork = blocks < self.params.max_blocks or self.params.after_last_block == "end"
        stops = (self.tags[T.PARALLEL_OPEN],) if may_fork else ()
        return StepRequest(MAIN, blocks, tuple(self.tokens), 1, self.remaining, stops)


AsyncGenerate = Callable[[list[int], list[int], int, float | None], Awaitable[Generation]]
"""``generate(prompt_ids, stop_ids, max_tokens, temperature)`` — one engine sample, awaited
(``temperature`` ``None``: the run's)."""


async def run_async(machine: ForkJoinMachine, prompt_ids: Sequence[int], generate: AsyncGenerate) -> ForkJoinMachine:
    """Drive ``machine`` to the end with one awaited call per sample; the ``n`` samples of a
    request (the paths of a block) run concurrently."""
    while machine.request is not None:
        request = machine.request
        prompt = [*prompt_ids, *request.prefix]
        stops = list(request.stop_ids)
        outputs = await asyncio.gather(
            *(generate(list(prompt), stops, request.max_tokens, request.temperature) for _ in range(request.n))
        )
        machine.feed(list(outputs))
    return machine
