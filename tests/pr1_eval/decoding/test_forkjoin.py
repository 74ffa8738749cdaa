"""Fork-join decoding for evaluation: wave batching over the protocol machine, the paper's block
limit and budget, repairs, inserted-token masks and the critical path."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from pr1_eval.decoding.base import SequentialDecoder, request_seed
from pr1_eval.decoding.factory import DecodingSpec, make_decoder
from pr1_eval.decoding.forkjoin import ForkJoinDecoder
from pr1_eval.engines.base import SamplingConfig
from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.forkjoin import ForkJoinParams
from pr1_eval.protocol.parse import parse_structure
from tests.support.parallel_fakes import TAG, FakeEngine, FakeTokenizer, Script

PROMPTS = [[50, 51, 52], [60, 61], [70]]
IDS = ["t/a", "t/b", "t/c"]


def _decode(script: Script, k: int = 4, budget: int = 400, **kw: Any) -> tuple[FakeEngine, list]:
    engine = FakeEngine(script)
    out = ForkJoinDecoder(**kw).decode(engine, PROMPTS, k, SamplingConfig(max_new_tokens=budget, seed=3), IDS)
    return engine, out


def _path_segments(tokens: list[int]) -> list[list[int]]:
    """Each <Path>…</Path> segment, tags included."""
    segs, current = [], None
    for t in tokens:
        if t == TAG[T.PATH_OPEN]:
            current = [t]
        elif current is not None:
            current.append(t)
            if t == TAG[T.PATH_CLOSE]:
                segs.append(current)
                current = None
    return segs


def test_waves_batch_across_samples_and_follow_the_protocol() -> None:
    engine, out = _decode(Script(blocks=2))
    kinds = [[r.request_id.rsplit("/", 1)[-1] for r in call] for call in engine.calls]
    assert len(engine.calls) == 7  # main, paths, summary, main, paths, summary, main
    first = engine.calls[0]
    assert [r.n for r in first] == [4, 4, 4] and [r.request_id for r in first] == IDS  # one n=k request per problem
    assert [r.seed for r in first] == [request_seed(3, rid) for rid in IDS]  # the sequential decoder's seeds
    assert all(r.stop_token_ids == (TAG[T.PARALLEL_OPEN],) for r in first)
    paths = engine.calls[1]
    assert len(paths) == 12 and all(r.n == 2 and r.stop_token_ids == (TAG[T.PATH_CLOSE],) for r in paths)
    assert all(list(r.prompt_token_ids[-2:]) == [TAG[T.PARALLEL_OPEN], TAG[T.PATH_OPEN]] for r in paths)
    summaries = engine.calls[2]
    assert all(r.stop_token_ids == (TAG[T.SUMMARY_CLOSE],) for r in summaries)
    assert all(list(r.prompt_token_ids[-3:]) == [TAG[T.PARALLEL_CLOSE], 7, TAG[T.SUMMARY_OPEN]] for r in summaries)
    assert kinds[3] == ["main"] * 12 and len({r.seed for r in engine.calls[3]}) == 12
    for samples in out:
        assert len(samples) == 4
        for s in samples:
            structure = parse_structure(s.text)
            assert structure.format_ok, structure.error
            assert structure.paths_per_block == [2, 2]
            assert s.engine_calls == 7 and s.finish_reason == "eos" and s.engine_inserted_tokens == 0


def test_paths_never_see_a_sibling() -> None:
    engine, _ = _decode(Script(blocks=1), k=2)
    for request in engine.calls[1]:
        assert TAG[T.PATH_CLOSE] not in request.prompt_token_ids  # a path prompt holds no other path


def test_critical_path_is_main_plus_longest_path_plus_summary() -> None:
    _, out = _decode(Script(blocks=2, path_lens=(4, 9)), k=2)
    for s in (s for samples in out for s in samples):
        segs = _path_segments(s.token_ids)
        assert len(segs) == 4
        others = sum(len(seg) for i in range(0, 4, 2) for seg in sorted(segs[i : i + 2], key=len)[:-1])
        assert s.critical_path_tokens == len(s.token_ids) - others
        assert s.critical_path_tokens < len(s.token_ids)


def test_three_paths_and_max_blocks() -> None:
    engine, out = _decode(Script(blocks=5), k=1, paths=3, max_blocks=2)
    forks = [call for call in engine.calls if call[0].request_id.endswith("/paths")]
    assert len(forks) == 2 and all(r.n == 3 for call in forks for r in call)
    assert all(r.request_id.endswith("/summary") for r in engine.calls[-1])  # the last call was block 2's summary
    for samples in out:
        for s in samples:
            structure = parse_structure(s.text)
            assert structure.paths_per_block == [3, 3] and structure.format_ok, structure.error
            assert s.finish_reason == "block_limit" and s.token_ids[-1] == TAG[T.SUMMARY_CLOSE]


@pytest.mark.parametrize("max_blocks", [0, 1, 2, 4])
def test_a_model_that_wants_six_blocks_gets_max_blocks(max_blocks: int) -> None:
    """The paper's rollout ends the response after the last allowed block's summary."""
    _, out = _decode(Script(blocks=6), k=2, max_blocks=max_blocks)
    for s in (s for samples in out for s in samples):
        assert parse_structure(s.text).n_blocks == max_blocks
        assert s.finish_reason == "block_limit"


def test_continuing_after_the_last_block_is_an_explicit_option() -> None:
    """``after_last_block="continue"``: the main line resumes with no fork point, so the model
    writes further blocks inline; it is opt-in and recorded in the run."""
    engine, out = _decode(Script(blocks=3), k=1, max_blocks=1, after_last_block="continue")  # type: ignore[arg-type]
    assert all(r.stop_token_ids == () for r in engine.calls[-1])
    for s in out[0]:
        assert parse_structure(s.text).n_blocks == 2 and s.finish_reason == "eos"  # one inline block past the cap


def test_eos_in_paths_and_summary_is_closed_and_recorded() -> None:
    _, out = _decode(Script(blocks=1, path_eos=True, summary_eos=True), k=2)
    for s in (s for samples in out for s in samples):
        structure = parse_structure(s.text)
        assert structure.format_ok, structure.error
        assert s.engine_inserted_tokens == 3  # two </Path> and one </Summary>
        assert s.finish_reason == "eos"  # the main line resumed after the summary and ended normally
        assert s.token_ids[-1] != TAG[T.SUMMARY_CLOSE]


@pytest.mark.parametrize("budget", [1, 2, 4, 5, 9, 13, 17, 18, 19, 20, 23, 27, 31, 40, 47, 60])
def test_one_total_budget_is_never_exceeded(budget: int) -> None:
    """The paper's budget rule: every request may use what is left, the response is cut at the cap
    (so only a response cut at exactly ``budget`` tokens may leave a tag open)."""
    _, out = _decode(Script(blocks=3, path_lens=(7, 12)), k=2, budget=budget)
    for s in (s for samples in out for s in samples):
        assert len(s.token_ids) <= budget
        assert s.finish_reason in ("eos", "length", "block_limit")
        if s.finish_reason == "length":
            assert len(s.token_ids) == budget
        else:
            structure = parse_structure(s.text)
            assert structure.format_ok, structure.error
        assert s.generated_mask is not None and len(s.generated_mask) == len(s.token_ids)
        assert s.critical_path_tokens is not None and s.critical_path_tokens <= len(s.token_ids)


def test_inserted_tokens_are_masked_and_have_logprob_zero() -> None:
    _, out = _decode(Script(blocks=1), k=1)
    s = out[0][0]
    assert s.logprobs is not None and s.generated_mask is not None
    assert len(s.logprobs) == len(s.generated_mask) == len(s.token_ids)
    inserted = [i for i, generated in enumerate(s.generated_mask) if not generated]
    assert [s.token_ids[i] for i in inserted] == [TAG[T.PATH_OPEN], TAG[T.PATH_OPEN], TAG[T.PARALLEL_CLOSE], 7,
                                                  TAG[T.SUMMARY_OPEN]]
    assert all(s.logprobs[i] == 0.0 for i in inserted)
    assert all(s.logprobs[i] == -0.5 for i in range(len(s.token_ids)) if i not in inserted)  # the engine's values


def test_without_blocks_it_matches_sequential_decoding() -> None:
    engine = FakeEngine(Script(blocks=0))
    sampling = SamplingConfig(max_new_tokens=50, seed=1)
    fj = ForkJoinDecoder().decode(engine, PROMPTS, 3, sampling, IDS)
    seq = SequentialDecoder().decode(FakeEngine(Script(blocks=0)), PROMPTS, 3, sampling, IDS)
    assert [[s.token_ids for s in p] for p in fj] == [[s.token_ids for s in p] for p in seq]
    assert len(engine.calls) == 1


def test_multi_token_tags_are_refused() -> None:
    engine = FakeEngine(Script(), tokenizer=FakeTokenizer(split_tags=True))
    with pytest.raises(Pr1EvalError, match="single|one"):
        ForkJoinDecoder().decode(engine, PROMPTS, 1, SamplingConfig(), IDS)


def test_make_decoder() -> None:
    fj = make_decoder("forkjoin", paths=3, max_blocks=2)
    info = fj.describe()
    assert (info["mode"], info["paths"], info["max_blocks"], info["after_last_block"]) == ("forkjoin", 3, 2, "end")
    assert info["protocol"] == "parallel-r1-forkjoin" and "path_budget" in info and "inserted_logprob" in info
    structured = make_decoder("structured", max_blocks=1, after_last_block="continue").describe()
    assert (structured["max_blocks"], structured["after_last_block"]) == (1, "continue")
    with pytest.raises(Pr1EvalError, match="after-last-block"):
        make_decoder("forkjoin", after_last_block="never")
    assert make_decoder("sequential").name == "sequential"
    assert make_decoder("structured").name == "structured"
    with pytest.raises(Pr1EvalError, match="unknown --decoding"):
        make_decoder("beam")
    with pytest.raises(Pr1EvalError):
        make_decoder("forkjoin", paths=0)


def test_a_decoding_spec_hands_its_fork_join_parameters_to_the_decoder_whole() -> None:
    """Every field off the paper's default, so a field lost on the way would show as the default."""
    config = SimpleNamespace(decoding="forkjoin", paths=3, max_blocks=2, after_last_block="continue",
                             path_temperature=None, max_path_tokens=7, secondary_eos="replace")
    spec = DecodingSpec.of(config)
    decoder = spec.decoder()
    assert isinstance(decoder, ForkJoinDecoder) and decoder.params is spec.params  # the same value, not a copy
    assert decoder.params == ForkJoinParams(paths=3, max_blocks=2, after_last_block="continue", path_temperature=None,
                                            max_path_tokens=7, secondary_eos="replace")
    info = spec.describe()
    assert {k: info[k] for k in ("mode", "paths", "max_blocks", "after_last_block", "path_temperature",
                                 "max_path_tokens", "secondary_eos", "response_budget")} == {
        "mode": "forkjoin", "paths": 3, "max_blocks": 2, "after_last_block": "continue", "path_temperature": "run",
        "max_path_tokens": 7, "secondary_eos": "replace", "response_budget": "sampling.max_new_tokens"}
    assert info == make_decoder("forkjoin", paths=3, max_blocks=2, after_last_block="continue",
                                path={"path_temperature": None, "max_path_tokens": 7,
                                      "secondary_eos": "replace"}).describe()  # the two ways in agree
    structured = DecodingSpec.of(SimpleNamespace(**{**vars(config), "decoding": "structured"})).describe()
    assert (structured["mode"], structured["max_blocks"], structured["after_last_block"]) == ("structured", 2, "continue")


# ------------------------------------------------------------ over the HF engine, with the tiny model

@pytest.fixture(scope="module")
def hf_trained() -> Iterator[Any]:
    import torch

    from pr1_eval.engines.hf import HFEngine
    from pr1_eval.testing.tiny_model import cached_tiny_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 128-wide model only loses from more threads on a contended CPU
    yield HFEngine(str(cached_tiny_model("trained")), device="cpu", dtype="float32", max_batch_size=64)
    torch.set_num_threads(threads)


def _count_model_calls(engine: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    inner = engine.model.generate

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(int(kwargs["input_ids"].shape[0]))
        return inner(*args, **kwargs)

    monkeypatch.setattr(engine.model, "generate", counted)
    return calls


def test_hf_engine_batches_rows_with_different_budgets(hf_trained: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from pr1_eval.engines.base import GenerationRequest

    calls = _count_model_calls(hf_trained, monkeypatch)
    prompt = hf_trained.tokenizer("Problem: What is 3 + 4?", add_special_tokens=False)["input_ids"]
    requests = [GenerationRequest(f"r{b}", prompt, n=2, max_new_tokens=b, seed=b) for b in (1, 3, 6, 0)]
    out = hf_trained.generate(requests, SamplingConfig(seed=0, temperature=1.0))
    assert calls == [8]  # one batched model call for every budget
    for budget, completions in zip((1, 3, 6, 0), out, strict=True):
        for c in completions:
            assert len(c.token_ids) <= budget
            assert c.finish_reason == ("length" if len(c.token_ids) == budget else "eos")


def test_forkjoin_over_hf_costs_a_few_calls_per_block(hf_trained: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_model_calls(hf_trained, monkeypatch)
    tok = hf_trained.tokenizer
    texts = [tok.apply_chat_template([{"role": "user", "content": f"Solve step by step with parallel thinking.\nProblem: What is {a} + 5?"}],
                                     tokenize=False, add_generation_prompt=True) for a in (3, 14, 27)]
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    decoder = ForkJoinDecoder()
    out = decoder.decode(hf_trained, prompts, 4, SamplingConfig(max_new_tokens=150, seed=0), ["h/0", "h/1", "h/2"])
    samples = [s for group in out for s in group]
    blocks = [parse_structure(s.text) for s in samples]
    # the deterministic trained model (seed 0) branches in 12 of 12 and forks 11 well-formed responses here
    assert sum(b.has_parallel for b in blocks) >= 6  # the trained model branches most of the time
    assert all(len(s.token_ids) <= 150 for s in samples)
    assert sum(b.format_ok for b in blocks) >= len(blocks) // 2  # forked blocks are well formed by construction
    waves = len(decoder.waves)
    assert waves <= 3 * decoder.max_blocks + 1 and len(calls) == waves  # one model call per wave: batched
    assert max(s.engine_calls for s in samples) <= waves
