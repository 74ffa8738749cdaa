"""Fork-join decoding for evaluation: the paper's rollout, batched in waves over any engine.

The protocol (what is generated, budgets, inserted tokens, the block limit, the critical path)
is :class:`pr1_eval.protocol.forkjoin.ForkJoinMachine`, the same machine repro's RL rollout drives;
this module only batches. One machine per sample; every sample whose next request is a main-line
continuation goes into one engine call, every sample that is forking into the next (one request
with ``n=paths`` each, so vLLM shares the prefix), every sample that is summarising into the next.
A run costs about three engine calls per block, not calls per sample. The first wave sends one
request per problem with ``n=k`` and the same request id and seed as sequential decoding, so a
response that never branches is token for token the sequential one.

Per sample it records engine calls (requests), the closing tags written for the model
(``engine_inserted_tokens``), the critical path, which tokens were generated
(``generated_mask``), when the engine records them, log-probs (0.0 on inserted tokens), and its
wall clock (``wall_s``: from the first wave to the end of the wave that finished it); each wave's
requests and seconds are in :attr:`ForkJoinDecoder.waves`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from pr1_eval.decoding.base import DecodedSample, Wave, request_seed
from pr1_eval.engines.base import Completion, Engine, GenerationRequest, SamplingConfig
from pr1_eval.protocol.forkjoin import (
    ENGINE_GAVE_UP,
    MAIN,
    PATHS,
    SUMMARY,
    ForkJoinMachine,
    ForkJoinParams,
    Generation,
)
from pr1_eval.protocol.paper_settings import (
    PAPER_MAX_BLOCKS,
    PAPER_MAX_PATH_TOKENS,
    PAPER_PATH_TEMPERATURE,
    PAPER_PATHS,
)
from pr1_eval.protocol.tags import resolve_tag_ids


def generation_from_completion(c: Completion) -> Generation:
    """An engine :class:`Completion` (EOS already removed, stop token kept) as a machine input."""
    logprobs = tuple(c.logprobs) if c.logprobs is not None else None
    finish = c.finish_reason if c.finish_reason in ("stop", "eos", *ENGINE_GAVE_UP) else "length"
    return Generation(tuple(c.token_ids), logprobs, finish)


def secondary_eos_ids(engine: Engine) -> frozenset[int]:
    """The engine's EOS ids other than its tokenizer's own (the generation config's extra ones),
    which the official loop does not recognise inside a path or summary."""
    every = {int(i) for i in getattr(engine, "eos_token_ids", ()) or ()}
    primary = getattr(engine.tokenizer, "eos_token_id", None)
    return frozenset(every - ({int(primary)} if primary is not None else set()))


_WAVE_WORDS = {MAIN: "main line", SUMMARY: "summaries"}


def wave_activity(number: int, kind: str, batch: Sequence[ForkJoinMachine], every: Sequence[ForkJoinMachine],
                  params: ForkJoinParams) -> str:
    """``fork-join wave 5: 2 paths each for 12 of 48 sample(s), block 2 of at most 4; 30/48 samples
    finished, 9120 tokens so far (longest sample 512)``. Why: on CPU one wave of a chunk can take
    minutes (its longest path), and the progress line used to say only "1 engine calls" meanwhile;
    this names what the engine is running, for how many samples, and how far the chunk has come."""
    what = f"{params.paths} paths each" if kind == PATHS else _WAVE_WORDS.get(kind, kind)
    done = sorted({m.request.block for m in batch if m.request is not None})  # blocks each sample has written
    span = "" if not done else str(done[0]) if len(done) == 1 else f"{done[0]}–{done[-1]}"
    if kind == MAIN:
        where = f", after {span} block(s)" if span else ""
    else:  # inside a block: its number counts from 1
        opened = [b + 1 for b in done]
        label = "" if not opened else str(opened[0]) if len(opened) == 1 else f"{opened[0]}–{opened[-1]}"
        where = f", block {label} of at most {params.max_blocks}" if label else ""
    tokens = [len(m.tokens) for m in every]
    finished = sum(m.done for m in every)
    return (f"fork-join wave {number}: {what} for {len(batch)} of {len(every)} sample(s){where}; "
            f"{finished}/{len(every)} samples finished, {sum(tokens)} tokens so far (longest sample {max(tokens, default=0)})")


class ForkJoinDecoder:
    """The paper's fork-join rollout (see the module docstring), batched in waves."""

    name = "forkjoin"

    def __init__(
        self,
        paths: int = PAPER_PATHS,
        max_blocks: int = PAPER_MAX_BLOCKS,
        after_last_block: str = "end",
        path_temperature: float | None = PAPER_PATH_TEMPERATURE,
        max_path_tokens: int = PAPER_MAX_PATH_TOKENS,
        secondary_eos: str = "keep",
    ) -> None:
        self.params = ForkJoinParams(
            paths=paths, max_blocks=max_blocks, after_last_block=after_last_block, path_temperature=path_temperature,
            max_path_tokens=max_path_tokens, secondary_eos=secondary_eos,
        )
        self.waves: list[Wave] = []
        """Every engine call of the last :meth:`decode`: kind, number of requests, seconds."""
        self.on_activity: Callable[[str], None] | None = None
        """Told, before each wave's engine call, what that call runs (:func:`wave_activity`): the
        progress line shows it, so a chunk waiting minutes on its longest paths says so."""
        self._ended: dict[int, float] = {}  # id(machine) -> when the last wave that fed it ended
        self._all: list[ForkJoinMachine] = []  # every sample of the chunk being decoded

    @classmethod
    def of(cls, params: ForkJoinParams) -> ForkJoinDecoder:
        """The decoder of a run's :class:`ForkJoinParams`, taken whole (``DecodingSpec.decoder``), so a
        protocol parameter added there reaches the decoder with no list of names to extend on the way."""
        decoder = cls()
        decoder.params = params
        return decoder

    @property
    def paths(self) -> int:
        return self.params.paths

    @property
    def max_blocks(self) -> int:
        return self.params.max_blocks

    def describe(self) -> dict[str, Any]:
        """Mode and every protocol parameter for ``run.json`` (the budget is the run's
        ``max_new_tokens``)."""
        info = self.params.describe()
        info["response_budget"] = "sampling.max_new_tokens"
        return {"mode": self.name, **info}

    def decode(
        self, engine: Engine, contexts: Sequence[Sequence[int]], k: int, sampling: SamplingConfig, request_ids: Sequence[str]
    ) -> list[list[DecodedSample]]:
        """``k`` samples per context, each decoded with the fork-join protocol."""
        tags = resolve_tag_ids(engine.tokenizer)
        newline = engine.tokenizer.encode("\n", add_special_tokens=False)
        params = replace(self.params, budget=sampling.max_new_tokens)
        secondary = secondary_eos_ids(engine)
        self.waves, self._ended = [], {}
        started = time.perf_counter()
        samples = [
            (p, j, list(ctx), rid, ForkJoinMachine(tags, newline, params, secondary_eos_ids=secondary))
            for p, (ctx, rid) in enumerate(zip(contexts, request_ids, strict=True))
            for j in range(k)
        ]
        self._all = [m for *_, m in samples]
        while any(not m.done for *_, m in samples):
            for kind in (MAIN, PATHS, SUMMARY):
                batch = [s for s in samples if s[4].request is not None and s[4].request.kind == kind]
                if batch:
                    self._wave(engine, kind, batch, sampling)
        out: list[list[DecodedSample]] = [[] for _ in contexts]
        for p, _, _, _, machine in samples:
            out[p].append(self._result(engine, machine, self._ended.get(id(machine), started) - started))
        return out

    def _wave(self, engine: Engine, kind: str, batch: list[tuple[int, int, list[int], str, ForkJoinMachine]],
              sampling: SamplingConfig) -> None:
        """One engine call for every sample of ``batch``; fresh samples of a problem share one
        ``n=k`` request (the sequential decoder's request)."""
        groups: dict[tuple[Any, ...], list[tuple[int, list[int], str, ForkJoinMachine]]] = {}
        for problem, index, context, rid, machine in batch:
            fresh = kind == MAIN and machine.request is not None and not machine.request.prefix
            key: tuple[Any, ...] = ("fresh", problem) if fresh else ("sample", problem, index)
            groups.setdefault(key, []).append((index, context, rid, machine))
        calls = []
        for key, members in groups.items():
            index, context, rid, machine = members[0]
            step = machine.request
            assert step is not None
            fresh = key[0] == "fresh"
            request_id = rid if fresh else f"{rid}#{index}/b{step.block}/{kind}"
            calls.append(GenerationRequest(
                request_id=request_id, prompt_token_ids=[*context, *step.prefix], n=len(members) if fresh else step.n,
                max_new_tokens=step.max_tokens, stop_token_ids=step.stop_ids, seed=request_seed(sampling.seed, request_id),
                temperature=step.temperature,
            ))
        if self.on_activity is not None:
            self.on_activity(wave_activity(len(self.waves) + 1, kind, [m for *_, m in batch], self._all, self.params))
        begun = time.perf_counter()
        outputs = engine.generate(calls, sampling)
        ended = time.perf_counter()
        self.waves.append(Wave(kind, len(calls), ended - begun))
        self._ended.update((id(m), ended) for members in groups.values() for *_, m in members)
        for (key, members), completions in zip(groups.items(), outputs, strict=True):
            generations = [generation_from_completion(c) for c in completions]
            if key[0] == "fresh":
                for (_, _, _, machine), generation in zip(members, generations, strict=True):
                    machine.feed([generation])
            else:
                members[0][3].feed(generations)

    @staticmethod
    def _result(engine: Engine, m: ForkJoinMachine, wall_s: float) -> DecodedSample:
        return DecodedSample(
            token_ids=m.tokens,
            text=engine.tokenizer.decode(m.tokens, skip_special_tokens=False),
            finish_reason=m.finish,
            engine_calls=m.steps,
            critical_path_tokens=m.critical_path_tokens(),
            engine_inserted_tokens=m.repairs,
            logprobs=m.logprobs if m.engine_logprobs else None,
            generated_mask=m.generated_mask,
            wall_s=wall_s,
        )
