"""``pr1-repro add-tokens``: make the six Parallel-R1 tags single special tokens of a base model.

Fork-join rollout stops on ``</Path>`` and the structured mask keys on tag ids, so every tag must
be exactly one token; Parallel-R1's checkpoints add them as special tokens. New embedding rows
start at the mean of the existing vocabulary's rows (the mean is a neutral point in embedding
space; random rows give the first SFT steps huge, noisy logits for the tags). Where the matrix
already has free rows beyond the tokenizer's vocabulary (Qwen pads 151,669 tokens to 151,936
rows), the tags take those rows and the matrix keeps its shape, so the checkpoint stays
shape-compatible with its base (vLLM, sharded loaders); otherwise the matrix is resized.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pr1_eval.protocol import tags as T
from pr1_eval.protocol.tags import single_token_tag_ids

MANIFEST = "repro_tokens.json"


@dataclass
class AddTokensReport:
    """What ``add_tokens`` did, written beside the checkpoint as ``repro_tokens.json``."""

    base: str
    out: str
    tag_ids: dict[str, int]
    added: list[str]
    already_present: list[str]
    rows_before: int
    rows_after: int
    reused_free_rows: bool
    resized: bool
    init: str


def single_token_id(tokenizer: Any, tag: str) -> int | None:
    """The id of ``tag`` when the tokenizer encodes it as exactly one token, else None (the
    protocol's resolver, :func:`pr1_eval.protocol.tags.single_token_tag_ids`)."""
    return single_token_tag_ids(tokenizer).get(tag)


def _mean_init(weight: Any, n_real_rows: int, rows: list[int]) -> None:
    """Set ``rows`` of ``weight`` to the mean of its first ``n_real_rows`` rows (in place)."""
    import torch

    with torch.no_grad():
        mean = weight[:n_real_rows].float().mean(dim=0).to(weight.dtype)
        for row in rows:
            weight[row] = mean


def _add_to_tokenizer(tokenizer: Any) -> tuple[list[str], list[str]]:
    """Register the missing tags as special tokens; return (added, already present)."""
    from tokenizers import AddedToken

    present = [tag for tag in T.ALL_TAGS if single_token_id(tokenizer, tag) is not None]
    missing = [tag for tag in T.ALL_TAGS if tag not in present]
    if missing:
        tokens = [AddedToken(tag, special=True, normalized=False) for tag in missing]
        tokenizer.add_special_tokens({"extra_special_tokens": tokens}, replace_extra_special_tokens=False)
    return missing, present


def add_tokens(base: str | os.PathLike[str], out: str | os.PathLike[str], *, dtype: str = "auto") -> AddTokensReport:
    """Load ``base``, add the six tags as single special tokens, initialise their rows, save to ``out``.

    Idempotent: tags that are already single tokens keep their ids and rows. The tokenizer's
    vocabulary before the call counts as "real" rows for the mean; free rows beyond it are
    reused before any resize.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(base))
    model: Any = AutoModelForCausalLM.from_pretrained(str(base), dtype=dtype)
    n_real = len(tokenizer)
    rows_before = int(model.get_input_embeddings().weight.shape[0])
    added, present = _add_to_tokenizer(tokenizer)
    tag_ids = {tag: single_token_id(tokenizer, tag) for tag in T.ALL_TAGS}
    if any(v is None for v in tag_ids.values()):
        raise RuntimeError(f"after adding, some tags are still not single tokens: {tag_ids}")
    ids = {tag: int(v) for tag, v in tag_ids.items() if v is not None}
    new_rows = [ids[tag] for tag in added]
    resized = bool(new_rows) and max(new_rows) >= rows_before
    if resized:
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    if new_rows:
        _mean_init(model.get_input_embeddings().weight, min(n_real, rows_before), new_rows)
        output = model.get_output_embeddings()
        if output is not None and output.weight.data_ptr() != model.get_input_embeddings().weight.data_ptr():
            _mean_init(output.weight, min(n_real, rows_before), new_rows)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    report = AddTokensReport(
        base=str(base),
        out=str(out_dir),
        tag_ids=ids,
        added=added,
        already_present=present,
        rows_before=rows_before,
        rows_after=int(model.get_input_embeddings().weight.shape[0]),
        reused_free_rows=bool(new_rows) and not resized,
        resized=resized,
        init="mean of the existing vocabulary's rows",
    )
    (out_dir / MANIFEST).write_text(json.dumps(asdict(report), indent=2) + "\n")
    return report
