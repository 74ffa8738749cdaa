"""Response-token NLL of a checkpoint on SFT rows, by a plain transformers forward.

The independent measure behind "SFT learned": VERL's ``train/loss`` is the trainer's own number;
this reads the merged HF folder (what ``pr1-eval`` scores) and the SFT parquet (what VERL trained
on), renders each row as the rollout does (chat-templated user turn with the generation prompt,
then the response and the tokenizer's EOS, as ``repro.sft_dataset`` ends rows) and averages
``-log p`` over the response tokens. A causal forward for every model: for an Unseen checkpoint it
is not the structured loss, only a second reading that must fall as well.
"""

from __future__ import annotations

from pathlib import Path


def response_nll(model_dir: str, parquet: Path, limit: int = 16) -> float:
    """Mean NLL per response token of ``model_dir`` on the first ``limit`` rows of ``parquet``."""
    import pyarrow.parquet as pq
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    rows = pq.read_table(parquet, columns=["messages"]).to_pylist()[:limit]
    total, count = 0.0, 0
    with torch.no_grad():
        for row in rows:
            messages = row["messages"]
            prompt = tokenizer.apply_chat_template(messages[:-1], add_generation_prompt=True, tokenize=False)
            prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            response_ids = tokenizer(messages[-1]["content"] + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
            ids = torch.tensor([prompt_ids + response_ids])
            logits = model(input_ids=ids).logits[0, :-1].float()
            targets = ids[0, 1:]
            nll = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
            total += float(nll[len(prompt_ids) - 1 :].sum())
            count += len(response_ids)
    return total / max(count, 1)
