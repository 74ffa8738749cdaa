"""Structured (Unseen) training: the padded 4-D mask on hand-built sequences, NaN-free padding,
VERL's FSDP engine hook (``prepare_model_inputs``) on CPU, its registration, and the SFT dataset."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pr1_eval.protocol import tags as T
from repro.structured_actor import attention_mask_for, response_starts, structured_batch
from tests.support.structured_engine import engine_for

TAGS = {
    T.PARALLEL_OPEN: 101,
    T.PARALLEL_CLOSE: 102,
    T.PATH_OPEN: 103,
    T.PATH_CLOSE: 104,
    T.SUMMARY_OPEN: 105,
    T.SUMMARY_CLOSE: 106,
}
P, PC, A, AC, S, SC = 101, 102, 103, 104, 105, 106
#        0  1  2  3  4   5  6  7  8   9  10 11 12
SEQ = [7, P, A, 8, AC, A, 9, 9, AC, PC, S, 5, SC]


def test_mask_and_positions_on_a_hand_built_block() -> None:
    mask, pos = structured_batch([SEQ], TAGS)
    # p = 1; both paths restart at 2; longest path = 4 tokens, so </Parallel> sits at 1 + 4 + 1 = 6
    assert pos[0].tolist() == [0, 1, 2, 3, 4, 2, 3, 4, 5, 6, 7, 8, 9]
    m = mask[0, 0]
    path1, path2 = range(2, 5), range(5, 9)
    for i in path2:
        assert not any(m[i, j] for j in path1), "a path must not see its sibling"
        assert all(m[i, j] for j in (0, 1)), "a path sees the shared prefix"
    for i in range(9, 13):
        assert all(m[i, : i + 1]), "</Parallel> and everything after see all paths"
    assert not m.triu(1).any(), "still causal"


def test_right_padding_rows_see_only_themselves_and_prompt_tags_are_plain() -> None:
    prompt_with_tags = [P, A, AC]  # the prompt *mentions* tags; they are not structure
    mask, pos = structured_batch([prompt_with_tags + SEQ, SEQ[:4]], TAGS, starts=[3, 0], max_len=18)
    assert pos[0, :3].tolist() == [0, 1, 2] and pos[0, 3:16].tolist() == [
        p + 3 for p in [0, 1, 2, 3, 4, 2, 3, 4, 5, 6, 7, 8, 9]
    ]
    row = mask[1, 0]
    for i in range(4, 18):
        assert row[i].nonzero().flatten().tolist() == [i]
    assert not row[:4, 4:].any(), "real rows never see padding"
    assert mask.shape == (2, 1, 18, 18) and pos.shape == (2, 18)


def test_response_starts_from_ppo_and_sft_batches() -> None:
    lengths = [10, 7]
    nested = torch.nested.as_nested_tensor([torch.ones(4), torch.ones(2)], layout=torch.jagged)
    assert response_starts({"response_mask": nested}, lengths) == [6, 5]
    assert response_starts({"response_mask": torch.ones(2, 3)}, lengths) == [7, 4]
    loss = torch.nested.as_nested_tensor([torch.tensor([0, 0, 1, 1.0]), torch.tensor([0, 1.0])], layout=torch.jagged)
    assert response_starts({"loss_mask": loss}, [4, 2]) == [2, 1]
    assert response_starts({}, [3]) == [0]


def test_attention_forms() -> None:
    mask, _ = structured_batch([SEQ], TAGS)
    assert attention_mask_for(mask, "sdpa", torch.bfloat16).dtype == torch.bool
    additive = attention_mask_for(mask, "eager", torch.float32)
    assert additive.dtype == torch.float32 and (additive[mask] == 0).all() and (additive[~mask] < -1e30).all()
    with pytest.raises(ValueError, match="attn_implementation"):
        attention_mask_for(mask, "flash_attention_2", torch.bfloat16)


# ---------- the VERL engine hook, on the tiny model ----------


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from repro.testing import tiny_model_dir

    path = tiny_model_dir()
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), attn_implementation="sdpa").eval()
    return model, tok


def tag_ids(tok) -> dict[str, int]:
    return {t: tok.convert_tokens_to_ids(t) for t in T.ALL_TAGS}


def micro_batch(prompts: list[list[int]], responses: list[list[int]], rmpad: bool = False):
    from verl.utils import tensordict_utils as tu

    seqs = [torch.tensor(p + r) for p, r in zip(prompts, responses, strict=True)]
    nested = torch.nested.as_nested_tensor(seqs, layout=torch.jagged)
    positions = torch.nested.as_nested_tensor([torch.arange(len(s)) for s in seqs], layout=torch.jagged)
    resp = torch.nested.as_nested_tensor([torch.ones(len(r), dtype=torch.long) for r in responses], layout=torch.jagged)
    meta = {"use_remove_padding": rmpad, "pad_mode": "no_padding", "pad_token_id": 0, "temperature": 1.0}
    return tu.get_tensordict(
        tensor_dict={"input_ids": nested, "position_ids": positions, "response_mask": resp}, non_tensor_dict=meta
    )


def test_engine_hook_matches_single_sequence_structured_forward(tiny) -> None:
    from pr1_eval.protocol.mask import build_mask_and_positions

    model, tok = tiny
    ids = tag_ids(tok)
    word = tok.encode(" 12 + 3", add_special_tokens=False)
    prompt = tok.encode(
        "<|im_start|>user\nUse <Parallel> blocks.<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False
    )
    block = [
        ids[T.PARALLEL_OPEN],
        ids[T.PATH_OPEN],
        *word,
        ids[T.PATH_CLOSE],
        ids[T.PATH_OPEN],
        *word[:2],
        ids[T.PATH_CLOSE],
    ]
    resp_a = word + block + [ids[T.PARALLEL_CLOSE], ids[T.SUMMARY_OPEN], *word, ids[T.SUMMARY_CLOSE]]
    resp_b = word[:3]
    engine = engine_for(model, tok)
    inputs, _ = engine.prepare_model_inputs(micro_batch([prompt, prompt], [resp_a, resp_b]))
    assert inputs["attention_mask"].shape[:2] == (2, 1) and inputs["attention_mask"].dtype == torch.bool
    with torch.no_grad():
        batched = model(
            input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], position_ids=inputs["position_ids"]
        ).logits
        assert torch.isfinite(batched).all(), "right padding must not produce NaN"
        seq = prompt + resp_a
        mask, pos = build_mask_and_positions(seq, ids, response_start=len(prompt))
        single = model(input_ids=torch.tensor([seq]), attention_mask=mask[None, None], position_ids=pos[None]).logits
    torch.testing.assert_close(batched[0, : len(seq)], single[0], atol=1e-4, rtol=1e-4)
    assert inputs["position_ids"][0, : len(prompt)].tolist() == list(range(len(prompt))), (
        "prompt tags are not structure"
    )


def test_second_path_never_sees_the_first(tiny) -> None:
    model, tok = tiny
    ids = tag_ids(tok)
    engine = engine_for(model, tok)
    a, b = tok.encode(" 7 * 8", add_special_tokens=False), tok.encode(" 99 - 1", add_special_tokens=False)

    def path2_logits(first_path: list[int]) -> torch.Tensor:
        resp = [
            ids[T.PARALLEL_OPEN],
            ids[T.PATH_OPEN],
            *first_path,
            ids[T.PATH_CLOSE],
            ids[T.PATH_OPEN],
            *a,
            ids[T.PATH_CLOSE],
        ]
        inputs, _ = engine.prepare_model_inputs(micro_batch([[5, 6]], [resp]))
        with torch.no_grad():
            logits = model(**{k: inputs[k] for k in ("input_ids", "attention_mask", "position_ids")}).logits
        return logits[0, -(len(a) + 2) :]

    torch.testing.assert_close(path2_logits(a), path2_logits(b + b), atol=1e-5, rtol=1e-5)


def test_engine_refuses_remove_padding_and_is_registered_for_nvidia(tiny, monkeypatch) -> None:
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    model, tok = tiny
    engine = engine_for(model, tok)
    with pytest.raises(RuntimeError, match="use_remove_padding=False"):
        engine.prepare_model_inputs(micro_batch([[5]], [[6, 7]], rmpad=True))
    monkeypatch.setenv("VERL_ENGINE_DEVICE", "cuda")
    monkeypatch.setenv("VERL_ENGINE_VENDOR", "nvidia")
    for backend in ("fsdp", "fsdp2"):
        assert EngineRegistry.get_engine_cls("language_model", backend) is type(engine)
    assert EngineRegistry._engines["language_model"]["fsdp"]["cuda"] is FSDPEngineWithLMHead, (
        "VERL's own entry untouched"
    )


def test_structured_sft_dataset_positions(tiny, tmp_path) -> None:
    from omegaconf import OmegaConf

    from pr1_eval.inputs.prompts import load_template
    from pr1_eval.protocol.mask import build_mask_and_positions
    from repro.data import build_sft, read_jsonl, write_parquet
    from repro.structured_actor import StructuredSFTDataset

    _, tok = tiny
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "parallel_gsm8k.jsonl"  # real traces, no data folder needed
    rows, _ = build_sft(read_jsonl(fixture)[:3], load_template(), "response")
    write_parquet(rows, tmp_path / "sft.parquet")
    config = OmegaConf.create(
        {"pad_mode": "no_padding", "max_length": 4096, "truncation": "right", "messages_key": "messages"}
    )
    dataset = StructuredSFTDataset(str(tmp_path / "sft.parquet"), tok, config)
    item = dataset[0]
    start = int(torch.nonzero(item["loss_mask"])[0, 0])
    assert start > 0 and any(int(t) in tag_ids(tok).values() for t in item["input_ids"][:start]), "prompt mentions tags"
    _, expected = build_mask_and_positions(item["input_ids"].tolist(), tag_ids(tok), response_start=start)
    assert item["position_ids"].tolist() == expected.tolist()
    assert item["position_ids"].tolist() != list(range(len(item["input_ids"]))), "a block reuses positions"
