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

from pr1_eval import tags as T
from pr1_eval.engines.base import Completion, GenerationRequest, SamplingConfig

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
                return Completion(kept, self.tokenizer.decode(kept), "eos")
            kept.append(token)
            if token in request.stop_token_ids:
                return Completion(kept, self.tokenizer.decode(kept), "stop", token, [-0.5] * len(kept))
        return Completion(kept, self.tokenizer.decode(kept), "length", None, [-0.5] * len(kept))
