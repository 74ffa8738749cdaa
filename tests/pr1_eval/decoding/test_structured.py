"""The structured mask, and the proof that decoders and teacher-forced forwards agree.

The consistency tests are the point of this file: log-probs recorded while structured decoding
with the tiny model trained the Unseen way (resp. sequential decoding with the causal one) equal
those of one teacher-forced forward
pass with ``build_mask_and_positions`` (resp. a plain causal mask), to 1e-4 in float32 — on the
CPU, and on CUDA too when a GPU is present (the model fixtures are parametrised by device).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pr1_eval.decoding.base import DecodedSample, SequentialDecoder
from pr1_eval.decoding.structured import StructuredDecoder
from pr1_eval.engines.base import SamplingConfig
from pr1_eval.engines.hf import HFEngine
from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.mask import (
    StructureTracker,
    additive_mask,
    build_mask_and_positions,
    build_mask_and_positions_reference,
    structured_layout,
)
from pr1_eval.protocol.parse import parse_structure
from pr1_eval.protocol.tags import resolve_tag_ids

TAGS = {tag: i + 1 for i, tag in enumerate(T.ALL_TAGS)}
PO, PC, HO, HC, SO, SC = (TAGS[t] for t in T.ALL_TAGS)  # parallel/path/summary open/close


def _rows(mask: torch.Tensor, row: int) -> list[int]:
    return [j for j in range(mask.shape[1]) if mask[row, j]]


def test_paper_layout_positions_and_mask() -> None:
    prompt = [100, PO, HO, 101]  # the prompt mentions tags in words: it stays causal
    response = [200, PO, HO, 201, 202, HC, HO, 203, HC, PC, 7, SO, 204, SC, 205]
    mask, pos = build_mask_and_positions(prompt + response, TAGS, response_start=len(prompt))
    assert pos.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 6, 7, 8, 10, 11, 12, 13, 14, 15]
    assert mask.dtype == torch.bool and mask.shape == (19, 19)
    assert _rows(mask, 10) == [0, 1, 2, 3, 4, 5, 10]  # second path: shared prefix and itself only
    assert _rows(mask, 12) == [0, 1, 2, 3, 4, 5, 10, 11, 12]
    assert _rows(mask, 9) == list(range(10))  # first path's </Path>
    assert _rows(mask, 13) == list(range(14))  # </Parallel> sees every path
    assert _rows(mask, 18) == list(range(19))
    assert torch.equal(mask[:4, :4], torch.ones(4, 4, dtype=torch.bool).tril())


def test_blocks_are_independent_and_paths_restart_after_p() -> None:
    seq = [PO, HO, 1 + 20, HC, HO, HC, HO, 30, 31, 32, HC, PC, SO, SC, 40, PO, HO, 41, HC, HO, 42, 43, HC, PC]
    mask, pos = build_mask_and_positions(seq, TAGS)
    p2 = 15
    assert pos[p2] == pos[p2 - 1] + 1
    assert pos[16] == pos[19] == pos[p2] + 1  # both paths of block 2 restart at p + 1
    assert pos[23] == pos[p2] + 4 + 1  # longest path (<Path> 42 43 </Path>) has 4 tokens
    assert pos[11] == 0 + 5 + 1  # block 1: longest path <Path> 30 31 32 </Path>
    assert not mask[19, 16] and not mask[20, 18]  # sibling paths of block 2
    assert all(mask[19, j] for j in range(16))  # block-2 path sees block 1 entirely (it is closed)
    assert not mask[6, 1] and not mask[6, 4] and mask[6, 0]  # third path of block 1 hides paths 1, 2


def test_gap_and_prefix_tokens_inside_a_block() -> None:
    seq = [PO, 50, HO, 51, HC, 7, HO, 52, HC, 7, PC, 60]
    mask, pos = build_mask_and_positions(seq, TAGS)
    # <Parallel>=0, 50 is shared prefix (1), paths restart at 2; trailing "\n" belongs to its path
    assert pos.tolist() == [0, 1, 2, 3, 4, 5, 2, 3, 4, 5, 6, 7]
    assert not mask[6, 5] and not mask[6, 2] and mask[6, 1]
    assert all(mask[10, :11])


@pytest.mark.parametrize(
    ("seq", "bad"),
    [
        ([10, HO, 11, 12], 1),  # <Path> outside a block
        ([PO, HO, 11, PO, 12], 3),  # nested <Parallel>
        ([PO, HO, 11, HO, 12], 3),  # <Path> inside an open path
        ([PO, HO, 11, PC, 12], 3),  # </Parallel> inside an open path
        ([10, HC, 11], 1),  # stray </Path>
        ([10, PC, 11], 1),  # stray </Parallel>
        ([PO, HC, 11], 1),  # </Path> before any path
    ],
)
def test_malformed_remainder_is_causal(seq: list[int], bad: int) -> None:
    mask, pos = build_mask_and_positions(seq, TAGS)
    for i in range(bad, len(seq)):
        assert _rows(mask, i) == list(range(i + 1))
        assert pos[i] == pos[:i].max() + 1


def test_cut_off_block_and_empty_input() -> None:
    mask, pos = build_mask_and_positions([PO, HO, 11, HC, HO, 12], TAGS)
    assert pos.tolist() == [0, 1, 2, 3, 1, 2] and not mask[5, 2]
    mask, pos = build_mask_and_positions([], TAGS)
    assert mask.shape == (0, 0) and pos.shape == (0,)


_TOKENS = st.lists(st.sampled_from([PO, PC, HO, HC, SO, SC, 7, 20, 21, 22]), max_size=60)


@settings(max_examples=150, deadline=None)
@given(_TOKENS, st.integers(0, 5))
def test_any_sequence_has_a_sane_mask(seq: list[int], start: int) -> None:
    mask, pos = build_mask_and_positions(seq, TAGS, response_start=start)
    n = len(seq)
    assert mask.shape == (n, n) and pos.shape == (n,)
    assert not (mask & ~torch.ones(n, n, dtype=torch.bool).tril()).any()  # never sees the future
    assert mask.diagonal().all()  # always sees itself
    tracker = StructureTracker(TAGS, start_position=min(start, n))
    slots = [tracker.push(t) for t in seq[min(start, n) :]]
    for offset, slot in enumerate(slots):
        i = min(start, n) + offset
        if slot.path < 0:
            assert mask[i, : i + 1].all()  # outside paths: plain causal


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([PO, PC, HO, HC, SO, SC, 7, 20, 21, 22]), max_size=80), st.integers(0, 8))
def test_fast_builder_equals_the_token_by_token_reference(seq: list[int], start: int) -> None:
    """The vectorised builder (structural tags only, sibling rectangles) is the reference fold."""
    mask, pos = build_mask_and_positions(seq, TAGS, response_start=start)
    ref_mask, ref_pos = build_mask_and_positions_reference(seq, TAGS, response_start=start)
    assert torch.equal(mask, ref_mask) and torch.equal(pos, ref_pos)
    assert torch.equal(build_mask_and_positions(torch.tensor(seq, dtype=torch.long), TAGS, start)[0], ref_mask)


def test_fast_builder_on_long_well_formed_responses() -> None:
    """Four blocks in a few thousand tokens (what the bench times): identical to the reference, and
    each </Parallel> at p + longest path + 1."""
    import random

    rng = random.Random(5)
    seq = [rng.randrange(20, 99) for _ in range(50)]
    for _ in range(4):
        seq += [rng.randrange(20, 99) for _ in range(rng.randrange(0, 300))] + [PO]
        for _ in range(rng.choice([2, 3])):
            seq += [HO, *(rng.randrange(20, 99) for _ in range(rng.randrange(0, 400))), HC]
        seq += [PC, 7, SO, *(rng.randrange(20, 99) for _ in range(rng.randrange(0, 80))), SC]
    mask, pos = build_mask_and_positions(seq, TAGS, response_start=50)
    ref_mask, ref_pos = build_mask_and_positions_reference(seq, TAGS, response_start=50)
    assert torch.equal(mask, ref_mask) and torch.equal(pos, ref_pos)
    layout = structured_layout(seq, TAGS, response_start=50)
    for block in range(4):
        spans = [span for (b, _), span in layout.paths.items() if b == block]
        p = spans[0][0] - 1  # the <Parallel> right before the first path
        assert seq[p] == PO and seq[max(e for _, e in spans)] == PC
        assert pos[max(e for _, e in spans)] == pos[p] + max(e - s for s, e in spans) + 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(20, 30), max_size=6), min_size=2, max_size=4), st.randoms())
def test_path_order_does_not_move_later_positions(paths: list[list[int]], rnd: Any) -> None:
    def seq(order: list[list[int]]) -> list[int]:
        return [20, PO, *[t for p in order for t in (HO, *p, HC)], PC, 21, 22]

    shuffled = list(paths)
    rnd.shuffle(shuffled)
    _, a = build_mask_and_positions(seq(paths), TAGS)
    _, b = build_mask_and_positions(seq(shuffled), TAGS)
    assert a[-3:].tolist() == b[-3:].tolist()
    assert a[-3] == 1 + max(len(p) + 2 for p in paths) + 1


def test_additive_mask_never_gives_nan_on_empty_rows(tiny_hf: HFEngine) -> None:
    model = tiny_hf.model
    device = next(model.parameters()).device
    ids = torch.tensor([[5, 40, 41, 42]], device=device)
    allowed = torch.ones(4, 4, dtype=torch.bool).tril()
    allowed[0] = False  # a row that sees nothing at all (worse than padding)
    for impl in ("eager", "sdpa"):
        model.config._attn_implementation = impl
        out = model(input_ids=ids, attention_mask=additive_mask(allowed[None, None], torch.float32).to(device),
                    position_ids=torch.arange(4, device=device)[None]).logits
        assert torch.isfinite(out).all(), impl
    model.config._attn_implementation = "sdpa"


def test_tags_must_be_single_tokens(tiny_hf: HFEngine) -> None:
    ids = resolve_tag_ids(tiny_hf.tokenizer)
    assert sorted(ids) == sorted(T.ALL_TAGS) and len(set(ids.values())) == 6

    class Plain:
        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return [1, 2]

    with pytest.raises(Pr1EvalError, match="one"):
        resolve_tag_ids(Plain())


# ------------------------------------------------------------------ consistency (spec item 5)

def _prompts(engine: HFEngine, n: int) -> list[list[int]]:
    tok = engine.tokenizer
    problems = [f"What is {a} + {b}?" for a, b in [(3, 4), (12, 7), (25, 17), (8, 9)][:n]]
    texts = [tok.apply_chat_template([{"role": "user", "content": f"Solve step by step with parallel thinking.\nProblem: {p}"}],
                                     tokenize=False, add_generation_prompt=True) for p in problems]
    return [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def _forward_logprobs(model: Any, prompt: list[int], response: list[int], mask: torch.Tensor | None,
                      pos: torch.Tensor | None) -> torch.Tensor:
    """Log-probs of ``response`` under one teacher-forced forward of prompt + response."""
    device = next(model.parameters()).device
    ids = torch.tensor([prompt + response], device=device)
    kwargs: dict[str, Any] = {}
    if mask is not None and pos is not None:
        kwargs = {"attention_mask": additive_mask(mask[None, None].to(device), torch.float32),
                  "position_ids": pos[None].to(device)}
    with torch.no_grad():
        logits = model(input_ids=ids, **kwargs).logits[0].float()
    lp = logits[len(prompt) - 1 : -1].log_softmax(-1)
    return lp.gather(-1, torch.tensor(response, device=device)[:, None]).squeeze(-1).cpu()


@pytest.fixture(scope="module")
def decoded(tiny_unseen: HFEngine) -> tuple[list[list[int]], list[list[DecodedSample]]]:
    """Samples drawn once with the structured decoder (sdpa attention) from the model trained under
    the structured mask, shared by the tests below."""
    prompts = _prompts(tiny_unseen, 3)
    out = StructuredDecoder().decode(tiny_unseen, prompts, 3, SamplingConfig(max_new_tokens=120, seed=11), ["t/0", "t/1", "t/2"])
    return prompts, out


def test_structured_decoding_matches_one_masked_forward(tiny_unseen: HFEngine, decoded: Any) -> None:
    """Sampled under the structured mask: recorded log-probs == one forward with the training mask."""
    engine, (prompts, out) = tiny_unseen, decoded
    tags = resolve_tag_ids(engine.tokenizer)
    branched = 0
    for prompt, samples in zip(prompts, out, strict=True):
        for s in samples:
            assert s.logprobs is not None and len(s.logprobs) == len(s.token_ids) > 0
            branched += any(len(b.paths) >= 2 for b in parse_structure(s.text).blocks)
            mask, pos = build_mask_and_positions(prompt + s.token_ids, tags, response_start=len(prompt))
            expected = _forward_logprobs(engine.model, prompt, s.token_ids, mask, pos)
            assert torch.allclose(torch.tensor(s.logprobs), expected, atol=1e-4)
            assert s.critical_path_tokens == int(pos[len(prompt):].max()) + 1 - len(prompt)
    assert branched >= 3  # sibling paths were really hidden while decoding (the Unseen model branches ~2 in 3)


def test_eager_attention_agrees_too(tiny_unseen: HFEngine, decoded: Any) -> None:
    """The same loop under eager attention (mask added to the scores) scores the samples identically."""
    engine, (prompts, out) = tiny_unseen, decoded
    tags = resolve_tag_ids(engine.tokenizer)
    pairs = [(p, s) for p, samples in zip(prompts, out, strict=True) for s in samples]
    engine.model.config._attn_implementation = "eager"
    try:
        again = StructuredDecoder().score(engine, [p for p, _ in pairs], [s.token_ids for _, s in pairs])
        for (prompt, s), logprobs in zip(pairs, again, strict=True):
            mask, pos = build_mask_and_positions(prompt + s.token_ids, tags, response_start=len(prompt))
            expected = _forward_logprobs(engine.model, prompt, s.token_ids, mask, pos)
            assert torch.allclose(torch.tensor(logprobs), expected, atol=1e-4)
            assert torch.allclose(torch.tensor(logprobs), torch.tensor(s.logprobs), atol=1e-4)
    finally:
        engine.model.config._attn_implementation = "sdpa"


def test_scoring_closed_blocks_matches_one_masked_forward(tiny_trained: HFEngine) -> None:
    """The decoding loop fed whole responses (closed blocks, several blocks, malformed tails) that the
    model wrote sequentially: still equal to one forward with ``build_mask_and_positions``."""
    engine = tiny_trained
    prompts = _prompts(engine, 3)
    out = SequentialDecoder().decode(engine, prompts, 3, SamplingConfig(max_new_tokens=120, seed=3), [f"c/{i}" for i in range(3)])
    pairs = [(p, s.token_ids) for p, samples in zip(prompts, out, strict=True) for s in samples if s.token_ids]
    tags = resolve_tag_ids(engine.tokenizer)
    scored = StructuredDecoder().score(engine, [p for p, _ in pairs], [r for _, r in pairs])
    closed = 0
    for (prompt, response), logprobs in zip(pairs, scored, strict=True):
        structure = parse_structure(engine.tokenizer.decode(response, skip_special_tokens=False))
        closed += sum(b.closed and len(b.paths) >= 2 for b in structure.blocks)
        mask, pos = build_mask_and_positions(prompt + response, tags, response_start=len(prompt))
        expected = _forward_logprobs(engine.model, prompt, response, mask, pos)
        assert torch.allclose(torch.tensor(logprobs), expected, atol=1e-4)
    assert closed >= 3  # </Parallel> at p + L + 1 and "later tokens see every path" were exercised


def test_structured_mask_is_not_the_causal_one(tiny_unseen: HFEngine, decoded: Any) -> None:
    """Guard against a vacuous consistency test: on a branched response the two forwards differ."""
    prompts, out = decoded
    branched = [(p, s) for p, samples in zip(prompts, out, strict=True) for s in samples
                if any(len(b.paths) >= 2 for b in parse_structure(s.text).blocks)]
    prompt, s = branched[0]
    causal = _forward_logprobs(tiny_unseen.model, prompt, s.token_ids, None, None)
    assert (causal - torch.tensor(s.logprobs)).abs().max() > 1e-3


def test_sequential_decoding_matches_one_causal_forward(tiny_trained: HFEngine) -> None:
    engine = tiny_trained
    engine.record_logprobs = True
    prompts = _prompts(engine, 3)  # different lengths: left padding is exercised
    out = SequentialDecoder().decode(engine, prompts, 3, SamplingConfig(max_new_tokens=120, seed=2), ["s/0", "s/1", "s/2"])
    engine.record_logprobs = False
    for prompt, samples in zip(prompts, out, strict=True):
        for s in samples:
            assert s.logprobs is not None and len(s.logprobs) == len(s.token_ids) > 0
            expected = _forward_logprobs(engine.model, prompt, s.token_ids, None, None)
            assert torch.allclose(torch.tensor(s.logprobs), expected, atol=1e-4)


def test_structured_decoding_is_batch_independent_and_needs_hf(tiny_trained: HFEngine) -> None:
    engine = tiny_trained
    prompts = _prompts(engine, 2)
    sampling = SamplingConfig(max_new_tokens=40, seed=9)
    both = StructuredDecoder().decode(engine, prompts, 2, sampling, ["b/0", "b/1"])
    alone = StructuredDecoder().decode(engine, prompts[1:], 2, sampling, ["b/1"])
    assert [s.token_ids for s in both[1]] == [s.token_ids for s in alone[0]]

    class NoModel:
        name = "vllm"
        tokenizer = engine.tokenizer

    with pytest.raises(Pr1EvalError, match="--engine hf"):
        StructuredDecoder().decode(NoModel(), prompts, 1, sampling, ["x", "y"])  # type: ignore[arg-type]


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))]


@pytest.fixture(scope="module", params=DEVICES)
def tiny_trained(request: pytest.FixtureRequest) -> Iterator[HFEngine]:
    """The trained tiny model in float32 (the 1e-4 tolerance is a float32 one) on each available
    device; on the CPU on one thread: a 128-wide model gains nothing from more and loses a lot when
    cores are contended."""
    from pr1_eval.testing.tiny_model import cached_tiny_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield HFEngine(str(cached_tiny_model("trained")), device=request.param, dtype="float32", max_batch_size=16)
    torch.set_num_threads(threads)


@pytest.fixture(scope="module", params=DEVICES)
def tiny_unseen(request: pytest.FixtureRequest) -> Iterator[HFEngine]:
    """The tiny model trained under the structured mask (``pr1-eval tiny-model --trained --structured``),
    the kind of model structured decoding is for; float32, one CPU thread, as ``tiny_trained``."""
    from pr1_eval.testing.tiny_model import cached_tiny_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield HFEngine(str(cached_tiny_model("trained-structured")), device=request.param, dtype="float32",
                   max_batch_size=32)
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_hf(tiny_trained: HFEngine) -> HFEngine:
    return tiny_trained


def _well_formed_and_branched(engine: HFEngine, template: str) -> float:
    """Share of 32 structured-decoded samples (4 problems × 8, seed 11) that are well formed with a block
    (``format_ok`` needs every block to have two paths or more)."""
    from pr1_eval.testing.tiny_model import format_rates

    tok = engine.tokenizer
    problems = [f"What is {a} + {b}?" for a, b in [(3, 4), (12, 7), (25, 17), (8, 9)]]
    prompts = [tok(tok.apply_chat_template([{"role": "user", "content": template.replace("{problem}", p)}],
                                           tokenize=False, add_generation_prompt=True), add_special_tokens=False)["input_ids"]
               for p in problems]
    out = StructuredDecoder().decode(engine, prompts, 8, SamplingConfig(max_new_tokens=120, seed=11),
                                     [f"u/{i}" for i in range(4)])
    return format_rates([s.text for group in out for s in group])["well_formed_with_block"]


@pytest.mark.slow
def test_unseen_tiny_model_branches_under_the_structured_mask() -> None:
    """The issue's bar: under ``--decoding structured`` at least half of the Unseen-trained model's samples
    are well formed and branch; the causal-trained model, which never learnt to close a block without
    seeing its sibling paths, does far worse. Measured (seed-0 models): Unseen 0.75 (short template) and
    0.69 (paper's), causal 0.00."""
    from pr1_eval.testing.tiny_model import cached_tiny_model
    from pr1_eval.testing.tiny_traces import SHORT_TEMPLATE, paper_template

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        unseen = HFEngine(str(cached_tiny_model("trained-structured")), device="cpu", dtype="float32", max_batch_size=32)
        causal = HFEngine(str(cached_tiny_model("trained")), device="cpu", dtype="float32", max_batch_size=32)
        rates = {name: _well_formed_and_branched(unseen, template)
                 for name, template in (("short", SHORT_TEMPLATE), ("paper", paper_template()))}
        causal_rate = _well_formed_and_branched(causal, SHORT_TEMPLATE)
    finally:
        torch.set_num_threads(threads)
    print(f"well formed and branched under the structured mask: Unseen {rates}, causal {causal_rate:.2f}")
    assert min(rates.values()) >= 0.5, rates
    assert causal_rate <= 0.25 and causal_rate < min(rates.values()) - 0.25



def test_seeded_sampling_is_reproducible_on_the_models_device(tiny_trained: HFEngine) -> None:
    """One generator per sample on the model's device: the same seed gives the same samples, another
    seed others (on CUDA this is what crashed with CPU generators)."""
    prompts = _prompts(tiny_trained, 2)
    decode = StructuredDecoder().decode
    first = decode(tiny_trained, prompts, 2, SamplingConfig(max_new_tokens=30, seed=4), ["r/0", "r/1"])
    again = decode(tiny_trained, prompts, 2, SamplingConfig(max_new_tokens=30, seed=4), ["r/0", "r/1"])
    other = decode(tiny_trained, prompts, 2, SamplingConfig(max_new_tokens=30, seed=5), ["r/0", "r/1"])
    tokens = [[s.token_ids for s in group] for group in first]
    assert tokens == [[s.token_ids for s in group] for group in again]
    assert tokens != [[s.token_ids for s in group] for group in other]


def _scripted_sampling(monkeypatch: pytest.MonkeyPatch, script: list[int]) -> None:
    """Make every row "sample" ``script`` (the model still runs, under the structured mask)."""
    import pr1_eval.decoding.structured as module

    step = iter(range(10_000))

    def scripted(logits: torch.Tensor, sampling: SamplingConfig, generators: Any) -> torch.Tensor:
        token = script[min(next(step), len(script) - 1)]
        return torch.full((logits.shape[0],), token, dtype=torch.long)

    monkeypatch.setattr(module, "sample_tokens", scripted)


@pytest.mark.parametrize(("max_blocks", "after", "blocks", "finish"),
                         [(0, "end", 0, "block_limit"), (1, "end", 1, "block_limit"), (2, "end", 2, "block_limit"),
                          (1, "continue", 3, "eos")])
def test_structured_decoding_applies_the_block_limit(tiny_hf: HFEngine, monkeypatch: pytest.MonkeyPatch,
                                                     max_blocks: int, after: str, blocks: int, finish: str) -> None:
    """``--max-blocks`` holds for structured decoding too: the response ends after the last allowed
    block's ``</Summary>`` (or before a ``<Parallel>`` past the cap)."""
    tags = resolve_tag_ids(tiny_hf.tokenizer)
    word = tiny_hf.tokenizer.encode(" 12", add_special_tokens=False)[0]
    po, pc, ho, hc, so, sc = (tags[t] for t in T.ALL_TAGS)
    block = [word, po, ho, word, hc, ho, word, word, hc, pc, so, word, sc]
    _scripted_sampling(monkeypatch, [*block * 3, word, tiny_hf.tokenizer.eos_token_id])
    decoder = StructuredDecoder(max_blocks=max_blocks, after_last_block=after)
    out = decoder.decode(tiny_hf, _prompts(tiny_hf, 1), 2, SamplingConfig(max_new_tokens=200, seed=0), ["m/0"])
    for s in out[0]:
        assert parse_structure(s.text).n_blocks == blocks and s.finish_reason == finish
        assert s.token_ids == ([*block * blocks, word] if after == "continue" else (block * blocks or [word]))
