"""The paper's fork-join rollout protocol, independent of any engine.

Main line until ``<Parallel>`` (or EOS, or the budget); then ``n_paths`` paths, each its own
request on ``context + <Path>`` stopping at ``</Path>`` — sampled independently and concurrently,
so a path never sees a sibling; the join appends the paths and ``</Parallel>\\n<Summary>``,
generates to ``</Summary>``, and resumes the main line. At most ``max_blocks`` blocks; one total
response budget. ``<Path>``, the join tokens and any tag the engine has to close (a path or
summary that hit EOS) are *engine-inserted*: they get mask 0 unless ``train_on_inserted_tokens``
(the official code trained on them). Every call of one trajectory carries the same request id so
the router keeps it on one server and its prefix cache serves every call after the first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

from pr1_eval import tags as T


@dataclass
class Generation:
    """One engine call's result: generated ids (a hit stop token included) and their log-probs."""

    token_ids: list[int]
    log_probs: list[float] | None = None


Generate = Callable[[list[int], list[int], int], Awaitable[Generation]]
"""``generate(prompt_ids, stop_token_ids, max_tokens)`` — one engine request."""


@dataclass(frozen=True)
class ForkJoinConfig:
    """Protocol knobs (paper: 2 paths, 4 blocks, 3000 response tokens, inserted tokens trained)."""

    n_paths: int = 2
    max_blocks: int = 4
    response_length: int = 3000
    train_on_inserted_tokens: bool = False


@dataclass
class Trajectory:
    """The response being built: ids, loss mask, log-probs, and counters for the report."""

    budget: int
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    blocks: int = 0
    engine_calls: int = 0
    inserted_tokens: int = 0
    engine_closed_tags: int = 0
    critical_path_tokens: int = 0

    @property
    def remaining(self) -> int:
        return self.budget - len(self.ids)

    def add_model(self, tokens: list[int], log_probs: list[float] | None) -> None:
        self.ids += tokens
        self.mask += [1] * len(tokens)
        known = list(log_probs or [])[: len(tokens)]
        self.log_probs += known + [0.0] * (len(tokens) - len(known))

    def add_inserted(self, tokens: list[int], trained: bool) -> None:
        self.ids += tokens
        self.mask += [1 if trained else 0] * len(tokens)
        self.log_probs += [0.0] * len(tokens)
        self.inserted_tokens += len(tokens)


class ForkJoinRollout:
    """Run the protocol for one prompt with any ``generate`` coroutine (vLLM server, HF, a script)."""

    def __init__(
        self,
        tag_ids: Mapping[str, int],
        eos_ids: Iterable[int],
        newline_ids: list[int],
        config: ForkJoinConfig,
        generate: Generate,
    ) -> None:
        self.tags = {tag: int(tag_ids[tag]) for tag in T.ALL_TAGS}
        self.eos = frozenset(int(i) for i in eos_ids)
        self.newline = list(newline_ids)
        self.config = config
        self._generate = generate

    async def _call(self, t: Trajectory, prompt: list[int], stops: list[int], max_tokens: int) -> Generation:
        t.engine_calls += 1
        return await self._generate(prompt, stops, max(1, max_tokens))

    async def run(self, prompt_ids: list[int]) -> Trajectory:
        """Build one response; never exceeds ``response_length`` tokens."""
        t = Trajectory(budget=self.config.response_length)
        parallel_open = self.tags[T.PARALLEL_OPEN]
        while t.remaining > 0:
            can_fork = t.blocks < self.config.max_blocks
            out = await self._call(t, prompt_ids + t.ids, [parallel_open] if can_fork else [], t.remaining)
            t.add_model(out.token_ids, out.log_probs)
            t.critical_path_tokens += len(out.token_ids)
            if not (can_fork and out.token_ids and out.token_ids[-1] == parallel_open) or t.remaining <= 0:
                break
            if not await self._block(t, prompt_ids):
                break
        self._truncate(t)
        return t

    def _close(self, t: Trajectory, out: Generation, closing_tag: int) -> None:
        """Append a path/summary body; the engine closes it when the model stopped without the tag."""
        tokens, log_probs = list(out.token_ids), out.log_probs
        if tokens and tokens[-1] == closing_tag:
            t.add_model(tokens, log_probs)
            return
        while tokens and tokens[-1] in self.eos:  # an EOS inside a block would end the whole response
            tokens.pop()
        t.add_model(tokens, log_probs)
        t.add_inserted([closing_tag], self.config.train_on_inserted_tokens)
        t.engine_closed_tags += 1

    async def _block(self, t: Trajectory, prompt_ids: list[int]) -> bool:
        """Fork, join and summarise one block. False when the budget ran out inside it."""
        trained = self.config.train_on_inserted_tokens
        path_open, path_close = self.tags[T.PATH_OPEN], self.tags[T.PATH_CLOSE]
        context = prompt_ids + t.ids + [path_open]
        budget = t.remaining - 1
        t.engine_calls += self.config.n_paths
        paths = await asyncio.gather(
            *(self._generate(context, [path_close], max(1, budget)) for _ in range(self.config.n_paths))
        )
        for out in paths:
            t.add_inserted([path_open], trained)
            self._close(t, out, path_close)
        t.critical_path_tokens += 1 + max(len(p.token_ids) for p in paths)
        join = [self.tags[T.PARALLEL_CLOSE], *self.newline, self.tags[T.SUMMARY_OPEN]]
        t.add_inserted(join, trained)
        t.blocks += 1
        if t.remaining <= 0:
            return False
        summary = await self._call(t, prompt_ids + t.ids, [self.tags[T.SUMMARY_CLOSE]], t.remaining)
        self._close(t, summary, self.tags[T.SUMMARY_CLOSE])
        t.critical_path_tokens += len(join) + len(summary.token_ids)
        return t.remaining > 0

    def _truncate(self, t: Trajectory) -> None:
        n = self.config.response_length
        t.ids, t.mask, t.log_probs = t.ids[:n], t.mask[:n], t.log_probs[:n]
