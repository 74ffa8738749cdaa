"""The SFT stages as VERL will read them: a Qwen3-like think-aware chat template through VERL's own
SFT dataset class, and batch / optimiser / truncation settings that mean what they say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("verl")

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "parallel_gsm8k.jsonl"

# The part of Qwen3's published chat template that matters here (system/tool branches left out):
# an assistant turn after the last user query, when it is the last message, is rendered with an
# empty think block; rendered alone (VERL tokenises turn by turn) it has none.
QWEN3_LIKE_TEMPLATE = """\
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- set content = message.content %}
    {%- if message.role == "user" or message.role == "system" %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if loop.index0 > ns.last_query_index and loop.last %}
            {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content + '\\n</think>\\n\\n' + content }}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""


def _stage(name: str) -> Any:
    from repro.testing import compose_stage

    return compose_stage(name, ["model.path=/m"])


@pytest.fixture(scope="module")
def qwen3_like_tokenizer() -> Any:
    from transformers import AutoTokenizer

    from repro.testing import tiny_model_dir

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir()))
    tokenizer.chat_template = QWEN3_LIKE_TEMPLATE
    return tokenizer


@pytest.fixture(scope="module")
def sft_parquet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pr1_eval.inputs.prompts import load_template
    from repro.data import build_sft, write_parquet

    raw = [json.loads(line) for line in FIXTURE.read_text().splitlines()[:4]]
    rows, _ = build_sft(raw, load_template(), "response")
    path = tmp_path_factory.mktemp("sft") / "sft.parquet"
    write_parquet(rows, path)
    return path


def test_the_template_has_qwen3s_whole_vs_turn_difference(qwen3_like_tokenizer: Any) -> None:
    messages = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]
    whole = qwen3_like_tokenizer.apply_chat_template(messages, tokenize=False)
    alone = qwen3_like_tokenizer.apply_chat_template(messages[1:], tokenize=False)
    assert "<think>\n\n</think>\n\nA" in whole and alone == "<|im_start|>assistant\nA<|im_end|>\n"


@pytest.mark.parametrize("stage", ["sft", "sft_unseen"])
def test_verl_sft_dataset_reads_rows_in_the_rollout_layout(stage: str, qwen3_like_tokenizer: Any,
                                                           sft_parquet: Path) -> None:
    """With the stage's data config, VERL's dataset (the structured one for ``sft_unseen``) yields
    prompt + ``<|im_start|>assistant\\n`` + response — exactly the prompt a rollout or an evaluation
    sends — and trains on the response only. Without ``ignore_input_ids_mismatch`` VERL stops on
    the first row."""
    from omegaconf import OmegaConf
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    from repro.structured_actor import StructuredSFTDataset

    cfg = _stage(stage)
    assert cfg.data.ignore_input_ids_mismatch is True
    cls = StructuredSFTDataset if stage == "sft_unseen" else MultiTurnSFTDataset  # the layout of VERL's own
    dataset = cls(str(sft_parquet), qwen3_like_tokenizer, cfg.data)
    tok = qwen3_like_tokenizer
    for i in range(len(dataset)):
        item = dataset[i]
        messages = dataset.messages[i]
        prompt = tok.apply_chat_template(messages[:1], add_generation_prompt=True, tokenize=True)
        prompt = list(prompt["input_ids"] if isinstance(prompt, dict) or hasattr(prompt, "keys") else prompt)
        ids = item["input_ids"].tolist()
        assert ids[: len(prompt)] == prompt, "the SFT prefix is the rollout prompt"
        assert int(torch.nonzero(item["loss_mask"])[0, 0]) == len(prompt), "loss starts at the response"
        assert "<think>" not in tok.decode(ids)
        assert tok.decode(ids[len(prompt):]).startswith(messages[1]["content"][:40])
    strict = OmegaConf.merge(cfg.data, {"ignore_input_ids_mismatch": False})
    with pytest.raises(AssertionError, match="think"):
        cls(str(sft_parquet), qwen3_like_tokenizer, strict)[0]


@pytest.mark.parametrize("stage", ["sft", "sft_unseen"])
def test_sft_batch_optimiser_and_truncation_settings(stage: str) -> None:
    """``micro_batch_size_per_gpu: 1`` is what runs (dynamic batching, VERL's SFT default, would ignore
    it), and the optimiser and truncation are the official SFT's — checked on VERL's own optimiser
    config dataclass."""
    from verl.utils.config import omega_conf_to_dataclass

    cfg = _stage(stage)
    assert cfg.data.use_dynamic_bsz is False and cfg.data.micro_batch_size_per_gpu == 1
    assert cfg.data.truncation == "error" and cfg.data.max_length == 4096
    optim = omega_conf_to_dataclass(cfg.optim)
    assert type(optim).__name__ == "FSDPOptimizerConfig"
    assert tuple(optim.betas) == (0.9, 0.95) and optim.weight_decay == 0.01 and optim.lr == 1e-5
    assert optim.lr_scheduler_type == "cosine" and optim.lr_warmup_steps_ratio == 0.1


@pytest.fixture(scope="module")
def qwen3_base_like_tokenizer(qwen3_like_tokenizer: Any) -> Any:
    """Qwen3-Base's arrangement: ``eos_token`` ``<|endoftext|>``, chat turns closed by ``<|im_end|>``."""
    import copy

    tokenizer = copy.deepcopy(qwen3_like_tokenizer)
    tokenizer.eos_token = "<|endoftext|>"
    return tokenizer


@pytest.mark.parametrize("stage", ["sft", "sft_unseen"])
def test_sft_rows_end_with_the_tokenizer_eos_like_the_official_sft(stage: str, qwen3_base_like_tokenizer: Any,
                                                                   sft_parquet: Path) -> None:
    """The stage's dataset class (as composed) ends every row with ``eos_token`` right after the
    response, trained, nothing after it: the official SFT's ``response + tokenizer.eos_token``. VERL's
    own dataset ends it with ``<|im_end|>\n`` instead. The EOS is in the checkpoint's stop set."""
    import importlib

    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    from pr1_eval.protocol.eos import eos_token_ids

    tok = qwen3_base_like_tokenizer
    cfg = _stage(stage)
    module = importlib.import_module(cfg.data.custom_cls.path.removeprefix("pkg://"))
    cls = getattr(module, cfg.data.custom_cls.name)
    ours, verls = cls(str(sft_parquet), tok, cfg.data), MultiTurnSFTDataset(str(sft_parquet), tok, cfg.data)
    eos, im_end = tok.convert_tokens_to_ids("<|endoftext|>"), tok.convert_tokens_to_ids("<|im_end|>")
    assert tok.eos_token_id == eos != im_end
    for i in range(len(ours)):
        item, base = ours[i], verls[i]
        ids, base_ids = item["input_ids"].tolist(), base["input_ids"].tolist()
        suffix = tok.encode("<|im_end|>\n", add_special_tokens=False)
        assert base_ids[-len(suffix):] == suffix and ids == [*base_ids[: -len(suffix)], eos]
        assert im_end not in ids[ids.index(eos, len(ids) - 1):] and ids.count(eos) == 1
        assert item["loss_mask"].tolist() == [*base["loss_mask"].tolist()[: -len(suffix)], 1]
        assert len(item["position_ids"]) == len(ids)
        if stage == "sft":
            assert item["position_ids"].tolist() == list(range(len(ids)))
        response = tok.decode(ids[int(torch.nonzero(item["loss_mask"])[0, 0]):])
        assert response.endswith(ours.messages[i][1]["content"][-20:] + "<|endoftext|>")
    assert eos in eos_token_ids(tok, None), "every engine's and the rollout's EOS set holds the SFT end token"
