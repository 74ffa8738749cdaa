"""How close a model is to opening a block: log p(``<Parallel>``) where the SFT rows open theirs, teacher-forced.

Sampling tells whether a model branches only once it does; before that, a score of 0 blocks says
nothing about how far the tag still is. This probe feeds each SFT row's prompt and its response up to
the first ``<Parallel>`` (the exact text the model is trained to continue with the tag) and reads the
next-token distribution there: the tag's log-probability, its rank among all tokens (1 = the greedy
choice) and the token the model would rather write. One forward per row, no sampling, so it gauges an
SFT run in seconds per checkpoint (docs/guides/smollm2.md uses it to choose the CPU SFT's settings).

    python -m repro.tag_probe --data ckpt/smollm2-sft/data/sft_parallel_gsm8k.parquet --rows 8 \\
        models/smollm2-tags ckpt/smollm2-sft/global_step_40/hf
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol.tags import single_token_tag_ids

TAG = "<Parallel>"


@dataclass(frozen=True)
class TagProbe:
    """One model's figures over the probed rows (rows without the tag are counted, not probed)."""

    model: str
    logprobs: list[float]
    ranks: list[int]
    instead: list[str]
    rows_without_tag: int

    @property
    def mean_logprob(self) -> float:
        return sum(self.logprobs) / len(self.logprobs)

    @property
    def top1_share(self) -> float:
        """Share of rows where the tag is the likeliest next token (what greedy decoding would write)."""
        return sum(rank == 1 for rank in self.ranks) / len(self.ranks)


def block_start_prefixes(tokenizer: Any, rows: Sequence[Sequence[dict[str, str]]],
                         tag: str = TAG) -> tuple[list[list[int]], int]:
    """Token ids of each row's prompt (chat template, generation prompt) + response up to its first ``tag``;
    and how many rows have no ``tag`` in their response."""
    prefixes, without = [], 0
    for messages in rows:
        response = messages[-1]["content"]
        cut = response.find(tag)
        if cut < 0:
            without += 1
            continue
        prompt = tokenizer.apply_chat_template(list(messages[:-1]), tokenize=False, add_generation_prompt=True)
        prefixes.append(tokenizer(prompt + response[:cut], add_special_tokens=False)["input_ids"])
    return prefixes, without


def probe(model_dir: str, rows: Sequence[Sequence[dict[str, str]]], tag: str = TAG) -> TagProbe:
    """The tag's log-probability and rank at each row's first block start under ``model_dir``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tag_id = single_token_tag_ids(tokenizer).get(tag)
    if tag_id is None:
        raise Pr1EvalError(f"{model_dir}: {tag} is not one token; add the tags with `pr1-repro add-tokens`")
    prefixes, without = block_start_prefixes(tokenizer, rows, tag)
    if not prefixes:
        raise Pr1EvalError(f"none of the {len(rows)} rows has {tag} in its response: nothing to probe")
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    logprobs: list[float] = []
    ranks: list[int] = []
    instead: list[str] = []
    with torch.no_grad():
        for ids in prefixes:
            logits = model(torch.tensor([ids])).logits[0, -1].float()
            logprobs.append(float(torch.log_softmax(logits, -1)[tag_id]))
            ranks.append(int((logits > logits[tag_id]).sum()) + 1)
            instead.append(str(tokenizer.decode([int(logits.argmax())])))
    return TagProbe(model_dir, logprobs, ranks, instead, without)


def _median(values: Sequence[int]) -> float:
    """The middle rank (the mean of the two middle ones for an even count): a display figure, not a statistic."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def probe_table(probes: Sequence[TagProbe]) -> str:
    """One line per model: mean log p, its probability, median and range of ranks, share greedy, the rival."""
    lines = [f"| model | mean log p({TAG}) (nats) | p | rank: median [min, max] | rank 1 | likeliest token instead |",
             "|---|---|---|---|---|---|"]
    for p in probes:
        rival = max(set(p.instead), key=p.instead.count)
        lines.append(f"| {p.model} | {p.mean_logprob:.2f} | {math.exp(p.mean_logprob):.2g} | "
                     f"{_median(p.ranks):g} [{min(p.ranks)}, {max(p.ranks)}] | "
                     f"{sum(r == 1 for r in p.ranks)}/{len(p.ranks)} | {rival!r} |")
    rows = len(probes[0].ranks) if probes else 0
    skipped = probes[0].rows_without_tag if probes else 0
    lines.append(f"{rows} rows probed; {skipped} without {TAG} left out")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m repro.tag_probe", description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="HF checkpoint folders with the six tags")
    parser.add_argument("--data", required=True, help="SFT parquet (a `messages` column), e.g. OUT/data of sft-cpu")
    parser.add_argument("--rows", type=int, default=8, help="the first N rows (default 8)")
    args = parser.parse_args(argv)
    import pandas as pd

    if not Path(args.data).is_file():
        raise SystemExit(f"--data {args.data}: no such file; sft-cpu writes OUT/data/sft_parallel_gsm8k.parquet")
    rows = [list(m) for m in pd.read_parquet(args.data)["messages"].head(args.rows)]
    try:
        probes = [probe(model, rows) for model in args.models]
    except Pr1EvalError as error:
        raise SystemExit(f"error: {error}") from None
    print(probe_table(probes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
