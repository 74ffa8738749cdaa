"""A scripted tokenizer and engine for decoding tests: exact control of what the "model" writes.

Token ids: 0 = EOS, 1..6 = the six tags (in ``tags.ALL_TAGS`` order), 7 = "\\n", 8 = pad, and
ids >= 10 are words that decode as ``w<id> ``. The engine writes, from the last tokens of its
prompt: a path after ``<Path>``, a summary after ``<Summary>``, otherwise a main-line segment that
opens a block until ``blocks`` blocks exist, then ends with EOS.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pr1_eval.engines.base import Completion, GenerationRequest, SamplingConfig
from pr1_eval.protocol import tags as T

EOS, NEWLINE, PAD = 0, 7, 8
TAG = {tag: i + 1 for i, tag in enumerate(T.ALL_TAGS)}
NAMES = {**{v: k for k, v in TAG.items()}, EOS: "<eos>", NEWLINE: "\n", PAD: "<pad>"}


class FakeTokenizer:
    """Just enough of a HF tokenizer for the decoders."""

    eos_token_id = EOS
    pad_token_id = PAD

    def __init__(self, split_tags: bool = False) -> None:
        self.split_tags = split_tags

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        if text in TAG:
            return [TAG[text], 99] if self.split_tags else [TAG[text]]
        if text == "\n":
            return [NEWLINE]
        return [10 + (ord(c) % 50) for c in text]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return "".join(NAMES.get(i, f"w{i} ") for i in ids)

    def batch_decode(self, seqs: Sequence[Sequence[int]], skip_special_tokens: bool = False) -> list[str]:
        return [self.decode(s, skip_special_tokens) for s in seqs]


@dataclass
class Script:
    """What the fake model writes."""

    blocks: int = 2
    main_len: int = 3
    path_lens: tuple[int, ...] = (4, 2, 6)
    summary_len: int = 2
    tail_len: int = 4
    path_eos: bool = False
    summary_eos: bool = False


@dataclass
class FakeEngine:
    """Scripted engine; records every call (its requests) for the tests to inspect."""

    script: Script = field(default_factory=Script)
    name: str = "fake"
    calls: list[list[GenerationRequest]] = field(default_factory=list)
    tokenizer: Any = field(default_factory=FakeTokenizer)

    def describe(self) -> dict[str, Any]:
        return {"backend": "fake"}

    def _write(self, prompt: Sequence[int], sample: int, rng: random.Random) -> list[int]:
        s = self.script
        words = [10 + rng.randrange(40) for _ in range(64)]
        if prompt and prompt[-1] == TAG[T.PATH_OPEN]:
            n = s.path_lens[sample % len(s.path_lens)]
            return words[:n] + [EOS if s.path_eos else TAG[T.PATH_CLOSE]]
        if prompt and prompt[-1] == TAG[T.SUMMARY_OPEN]:
            return words[: s.summary_len] + [EOS if s.summary_eos else TAG[T.SUMMARY_CLOSE]]
        if list(prompt).count(TAG[T.PARALLEL_OPEN]) < s.blocks:
            return words[: s.main_len] + [TAG[T.PARALLEL_OPEN]] + words[:2] + [EOS]
        return words[: s.tail_len] + [EOS]

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        self.calls.append(list(requests))
        out = []
        for r in requests:
            rng = random.Random(r.seed)
            budget = r.max_new_tokens if r.max_new_tokens is not None else sampling.max_new_tokens
            out.append([self._complete(self._write(r.prompt_token_ids, j, rng), r, budget) for j in range(r.n)])
        return out

    def _complete(self, tokens: list[int], request: GenerationRequest, budget: int) -> Completion:
        kept: list[int] = []
        for token in tokens[:budget]:
            if token == EOS:
                return Completion(kept, self.tokenizer.decode(kept), "eos", None, [-0.5] * len(kept))
            kept.append(token)
            if token in request.stop_token_ids:
                return Completion(kept, self.tokenizer.decode(kept), "stop", token, [-0.5] * len(kept))
        return Completion(kept, self.tokenizer.decode(kept), "length", None, [-0.5] * len(kept))


# ------------------------------------------------ one scripted model behind two engine interfaces


@dataclass
class ScriptedModel:
    """A deterministic "model" for the cross-test: what it writes depends only on the prompt and on
    how many samples were already drawn for that exact prompt (``variant``), so the batched
    evaluation decoder and the asynchronous agent loop, driving the same protocol, must receive
    the same tokens. Raw outputs end with the EOS or the stop token, as vLLM returns them.

    Blocks: the main line opens one until ``want_blocks`` exist; paths have uneven lengths, some end
    at EOS instead of ``</Path>``; the second block's summary ends at EOS.
    """

    tags: dict[str, int]
    eos: int
    words: list[int]
    want_blocks: int = 5
    counts: dict[tuple[int, ...], int] = field(default_factory=dict)

    def _words(self, n: int, salt: int) -> list[int]:
        return [self.words[(salt * 31 + i * 7) % len(self.words)] for i in range(n)]

    def write(self, prompt: Sequence[int]) -> tuple[list[int], int]:
        key = tuple(prompt)
        variant = self.counts.get(key, 0)
        self.counts[key] = variant + 1
        blocks = list(prompt).count(self.tags[T.PARALLEL_OPEN])
        salt = len(prompt) + 13 * variant
        last = prompt[-1] if prompt else None
        if last == self.tags[T.PATH_OPEN]:
            n = (3, 9, 5)[variant % 3] + blocks
            end = self.eos if (variant + blocks) % 3 == 2 else self.tags[T.PATH_CLOSE]
            return [*self._words(n, salt), end], variant
        if last == self.tags[T.SUMMARY_OPEN]:
            end = self.eos if blocks == 2 else self.tags[T.SUMMARY_CLOSE]
            return [*self._words(2 + blocks, salt), end], variant
        if blocks < self.want_blocks:
            return [*self._words(3 + variant % 2, salt), self.tags[T.PARALLEL_OPEN], *self._words(3, salt + 1),
                    self.eos], variant
        return [*self._words(4, salt), self.eos], variant

    @staticmethod
    def logprob(token: int, index: int, variant: int) -> float:
        return -((token % 7) + 1) / 10 - index / 1000 - variant / 100

    def sample(self, prompt: Sequence[int], stops: Sequence[int], max_tokens: int) -> tuple[list[int], list[float]]:
        """Raw ids (cut after the first stop token or EOS, then at ``max_tokens``) and log-probs."""
        tokens, variant = self.write(prompt)
        out: list[int] = []
        for token in tokens:
            out.append(token)
            if token in stops or token == self.eos:
                break
        out = out[:max_tokens]
        return out, [self.logprob(t, i, variant) for i, t in enumerate(out)]


@dataclass
class ScriptedEngine:
    """The scripted model as a pr1-eval :class:`Engine` (EOS removed, stop token kept)."""

    model: ScriptedModel
    tokenizer: Any
    name: str = "scripted"

    def describe(self) -> dict[str, Any]:
        return {"backend": "scripted"}

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingConfig) -> list[list[Completion]]:
        out = []
        for r in requests:
            budget = r.max_new_tokens if r.max_new_tokens is not None else sampling.max_new_tokens
            completions = []
            for _ in range(r.n):
                ids, lps = self.model.sample(r.prompt_token_ids, r.stop_token_ids, budget)
                if ids and ids[-1] in r.stop_token_ids:
                    completions.append(Completion(ids, "", "stop", ids[-1], lps))
                elif ids and ids[-1] == self.model.eos:
                    completions.append(Completion(ids[:-1], "", "eos", None, lps[:-1]))
                else:
                    completions.append(Completion(ids, "", "length", None, lps))
            out.append(completions)
        return out


class ScriptedServer:
    """The scripted model as VERL's server manager (``generate`` → ``TokenOutput``, raw ids).

    A plain class, not a dataclass: ``hydra.utils.instantiate`` would turn a dataclass argument
    into a config node."""

    def __init__(self, model: ScriptedModel, global_steps: int = 3) -> None:
        self.model = model
        self.global_steps = global_steps
        self.calls: list[dict[str, Any]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), **sampling_params})
        ids, lps = self.model.sample(prompt_ids, sampling_params.get("stop_token_ids") or [],
                                     int(sampling_params["max_tokens"]))
        steps = self.global_steps
        return TokenOutput(token_ids=ids, log_probs=lps if sampling_params.get("logprobs") else None,
                           stop_reason="completed",
                           extra_fields={"global_steps": steps, "min_global_steps": steps, "max_global_steps": steps})
