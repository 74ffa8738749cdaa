"""Fork-join decoding: the Parallel-R1 paper's rollout protocol, over any engine.

Per sample: the main line runs until ``<Parallel>`` or EOS; then ``paths`` paths are sampled
independently, each from ``context + <Path>`` until ``</Path>`` (a path never sees a sibling);
the join appends the paths and ``</Parallel>\\n<Summary>``, the summary runs until
``</Summary>``, and the main line resumes. After ``max_blocks`` blocks the main line no longer
stops at ``<Parallel>`` (a later block is written inline, sequentially, as the model pleases).

Batched across samples in *waves*: every sample that is on its main line goes into one engine
call, every sample that is forking into the next (one request with ``n=paths`` each, so vLLM
shares the prefix), every sample that is summarising into the next. A run costs about three
engine calls per block, not calls per sample. The first wave sends one request per problem with
``n=k`` and the same seed as sequential decoding.

Budget: one total response budget ``sampling.max_new_tokens`` over the serialised response
(main line + every path + join + summary, tags included). Paths of a block split what is left
evenly, after reserving the join and a closing tag for each path and the summary, so a block
never overruns it. The main line gets all that is left, exactly as in sequential decoding (a
response that never branches is token for token the sequential one); the price is one edge
case: a ``<Parallel>`` sampled as the very last token of the budget is closed with
``</Parallel>`` one token past it.

Repairs (counted in ``engine_inserted_tokens``, as the paper's rollout does): a path that ends at
EOS or at its budget gets ``</Path>``; a summary that ends at EOS gets ``</Summary>`` and the main
line resumes; a summary cut by the budget gets ``</Summary>`` and the sample ends (``length``); a
``<Parallel>`` with no room left for a block gets ``</Parallel>`` and the sample ends. Protocol
tokens (``<Path>``, ``</Parallel>\\n<Summary>``) are not repairs and are not counted.

Per sample it records engine calls, tokens, and the critical path a parallel engine waits for:
main-line tokens + for each block the longest path (its tags included) + join and summary, so
``critical_path_tokens + (tokens of the other paths) == len(token_ids)``. ``logprobs`` (when the
engine records them) hold ``nan`` for protocol and repair tokens, which were not sampled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pr1_eval import tags as T
from pr1_eval.decoding.base import DecodedSample, request_seed
from pr1_eval.engines.base import Completion, Engine, GenerationRequest, SamplingConfig
from pr1_eval.errors import Pr1EvalError
from pr1_eval.structured import resolve_tag_ids

NOT_SAMPLED = math.nan
"""Log-prob recorded for tokens the decoder inserted rather than sampled."""


@dataclass
class _Sample:
    """Mutable decoding state of one sample."""

    problem: int
    index: int
    context: list[int]
    rid: str
    response: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    state: str = "main"  # main | paths | summary | done
    blocks: int = 0
    calls: int = 0
    critical: int = 0
    inserted: int = 0
    finish: str = "length"

    def extend(self, tokens: Sequence[int], logprobs: Sequence[float] | None) -> None:
        """Append tokens; ``logprobs=None`` marks them inserted (or the engine records none)."""
        self.response.extend(tokens)
        if self.logprobs is not None:
            if logprobs is None or len(logprobs) != len(tokens):
                self.logprobs.extend([NOT_SAMPLED] * len(tokens))
            else:
                self.logprobs.extend(logprobs)

    def finish_as(self, reason: str) -> None:
        self.state, self.finish = "done", reason


class ForkJoinDecoder:
    """The paper's fork-join rollout (see the module docstring), batched in waves."""

    name = "forkjoin"

    def __init__(self, paths: int = 2, max_blocks: int = 4) -> None:
        if paths < 1:
            raise Pr1EvalError(f"--paths must be at least 1, got {paths}")
        if max_blocks < 0:
            raise Pr1EvalError(f"--max-blocks must be 0 or more, got {max_blocks}")
        self.paths = paths
        self.max_blocks = max_blocks
        self.waves: list[tuple[str, int]] = []
        """(kind, number of requests) of every engine call of the last :meth:`decode`."""

    def describe(self) -> dict[str, Any]:
        return {"mode": self.name, "paths": self.paths, "max_blocks": self.max_blocks, "protocol": "parallel-r1-paper"}

    def decode(
        self, engine: Engine, contexts: Sequence[Sequence[int]], k: int, sampling: SamplingConfig, request_ids: Sequence[str]
    ) -> list[list[DecodedSample]]:
        """``k`` samples per context, each decoded with the fork-join protocol."""
        tag = resolve_tag_ids(engine.tokenizer)
        self._tag = tag
        self._join = [tag[T.PARALLEL_CLOSE], *engine.tokenizer.encode("\n", add_special_tokens=False), tag[T.SUMMARY_OPEN]]
        self._budget = sampling.max_new_tokens
        self.waves = []
        samples = [
            _Sample(problem=p, index=j, context=list(ctx), rid=rid)
            for p, (ctx, rid) in enumerate(zip(contexts, request_ids, strict=True))
            for j in range(k)
        ]
        while any(s.state != "done" for s in samples):
            for state, wave in (("main", self._main_wave), ("paths", self._path_wave), ("summary", self._summary_wave)):
                batch = [s for s in samples if s.state == state]
                if batch:
                    wave(engine, batch, sampling)
        out: list[list[DecodedSample]] = [[] for _ in contexts]
        for s in samples:
            out[s.problem].append(self._result(engine, s))
        return out

    # ----------------------------------------------------------------- waves
    def _call(self, engine: Engine, kind: str, requests: list[GenerationRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        self.waves.append((kind, len(requests)))
        return engine.generate(requests, sampling)

    def _left(self, s: _Sample) -> int:
        return self._budget - len(s.response)

    def _main_wave(self, engine: Engine, batch: list[_Sample], sampling: SamplingConfig) -> None:
        """One call for every sample on its main line; fresh samples of a problem share one ``n=k`` request."""
        groups: dict[tuple[Any, ...], list[_Sample]] = {}
        for s in batch:
            if self._left(s) <= 0:
                s.finish_as("length")
                continue
            key: tuple[Any, ...] = ("fresh", s.problem) if not s.response else ("sample", s.problem, s.index)
            groups.setdefault(key, []).append(s)
        if not groups:
            return
        requests = []
        for key, members in groups.items():
            s = members[0]
            may_fork = self._may_fork(s)
            rid = s.rid if key[0] == "fresh" else f"{s.rid}#{s.index}/b{s.blocks}/main"
            requests.append(GenerationRequest(
                request_id=rid, prompt_token_ids=s.context + s.response, n=len(members),
                max_new_tokens=self._left(s),
                stop_token_ids=(self._tag[T.PARALLEL_OPEN],) if may_fork else (),
                seed=request_seed(sampling.seed, rid),
            ))
        outputs = self._call(engine, "main", requests, sampling)
        for members, completions in zip(groups.values(), outputs, strict=True):
            for s, c in zip(members, completions, strict=True):
                s.calls += 1
                s.extend(c.token_ids, c.logprobs)
                s.critical += len(c.token_ids)
                if c.finish_reason == "stop" and c.token_ids and c.token_ids[-1] == self._tag[T.PARALLEL_OPEN]:
                    self._open_block(s)
                else:
                    s.finish_as("eos" if c.finish_reason == "eos" else "length")

    def _may_fork(self, s: _Sample) -> bool:
        """Stop at ``<Parallel>`` while blocks remain."""
        return s.blocks < self.max_blocks

    def _path_allowance(self, s: _Sample) -> int:
        """Tokens each path may generate: an even share of what is left after the join, the
        summary's closing tag, and each path's ``<Path>``/``</Path>``."""
        share = (self._left(s) - len(self._join) - 1) // self.paths
        return share - 2

    def _open_block(self, s: _Sample) -> None:
        if self._path_allowance(s) >= 1:
            s.state = "paths"
            return
        s.extend([self._tag[T.PARALLEL_CLOSE]], None)  # no room for a block: close it, end here (may be 1 over)
        s.inserted += 1
        s.critical += 1
        s.finish_as("length")

    def _path_wave(self, engine: Engine, batch: list[_Sample], sampling: SamplingConfig) -> None:
        """One call for every forking sample: one request with ``n=paths`` on ``context + <Path>``."""
        open_path, close_path = self._tag[T.PATH_OPEN], self._tag[T.PATH_CLOSE]
        requests = []
        for s in batch:
            rid = f"{s.rid}#{s.index}/b{s.blocks}/paths"
            requests.append(GenerationRequest(
                request_id=rid, prompt_token_ids=[*s.context, *s.response, open_path], n=self.paths,
                max_new_tokens=self._path_allowance(s), stop_token_ids=(close_path,), seed=request_seed(sampling.seed, rid),
            ))
        outputs = self._call(engine, "paths", requests, sampling)
        for s, completions in zip(batch, outputs, strict=True):
            s.calls += 1
            longest = 0
            for c in completions:
                s.extend([open_path], None)
                s.extend(c.token_ids, c.logprobs)
                length = 1 + len(c.token_ids)
                if c.finish_reason != "stop":  # EOS or budget: the engine closes the path
                    s.extend([close_path], None)
                    s.inserted += 1
                    length += 1
                longest = max(longest, length)
            s.critical += longest + len(self._join)
            s.extend(self._join, None)
            s.blocks += 1
            s.state = "summary"

    def _summary_wave(self, engine: Engine, batch: list[_Sample], sampling: SamplingConfig) -> None:
        """One call for every sample whose block was just joined: generate until ``</Summary>``."""
        close_summary = self._tag[T.SUMMARY_CLOSE]
        requests, callers = [], []
        for s in batch:
            if self._left(s) - 1 <= 0:  # only the reserved closing tag fits
                self._close_summary(s, cut=True)
                continue
            rid = f"{s.rid}#{s.index}/b{s.blocks - 1}/summary"
            requests.append(GenerationRequest(
                request_id=rid, prompt_token_ids=s.context + s.response, n=1, max_new_tokens=self._left(s) - 1,
                stop_token_ids=(close_summary,), seed=request_seed(sampling.seed, rid),
            ))
            callers.append(s)
        if not requests:
            return
        outputs = self._call(engine, "summary", requests, sampling)
        for s, completions in zip(callers, outputs, strict=True):
            c = completions[0]
            s.calls += 1
            s.extend(c.token_ids, c.logprobs)
            s.critical += len(c.token_ids)
            if c.finish_reason == "stop":
                s.state = "main"
            else:
                self._close_summary(s, cut=c.finish_reason == "length")

    def _close_summary(self, s: _Sample, cut: bool) -> None:
        """Repair a summary that ended without ``</Summary>``; a budget cut ends the sample."""
        s.extend([self._tag[T.SUMMARY_CLOSE]], None)
        s.inserted += 1
        s.critical += 1
        if cut:
            s.finish_as("length")
        else:
            s.state = "main"  # EOS inside a summary: close it and resume, as the paper's rollout does

    @staticmethod
    def _result(engine: Engine, s: _Sample) -> DecodedSample:
        return DecodedSample(
            token_ids=s.response,
            text=engine.tokenizer.decode(s.response, skip_special_tokens=False),
            finish_reason=s.finish,
            engine_calls=s.calls,
            critical_path_tokens=s.critical,
            engine_inserted_tokens=s.inserted,
            logprobs=s.logprobs if s.logprobs is not None and any(not math.isnan(x) for x in s.logprobs) else None,
        )
