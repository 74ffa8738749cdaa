"""The vLLM engine against a fake ``vllm`` that mirrors the real one (tests/fake_vllm).

What is checked: the LLM is built with prefix caching and the parallel/memory options; a problem
is one request with ``SamplingParams(n=k)``; per-request budget, stop ids and seed reach vLLM;
special tokens are kept; outputs map onto the engine contract (stop token kept, EOS dropped,
a generation-config EOS reported as a stop token still an EOS, abort/error kept distinct); greedy
runs work (vLLM refuses n > 1 when greedy); a prompt at the model's length limit yields a
``length`` completion instead of failing the whole call; vLLM's seed + j seeding per sample;
building an engine inside a daemonic process fails as the real ``LLM`` does (why the old
process pool died) while a normal process works; without vllm (or on Python < 3.11) the error
says what to install; ``--engine auto`` falls back to HF without CUDA.
"""

from __future__ import annotations

import json
import multiprocessing
import sys
from pathlib import Path
from typing import Any

import pytest

from pr1_eval.decoding.base import SequentialDecoder, request_seed
from pr1_eval.decoding.forkjoin import ForkJoinDecoder
from pr1_eval.engines.base import GenerationRequest, SamplingConfig
from pr1_eval.engines.factory import make_engine, resolve_engine_name
from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.parse import parse_structure
from pr1_eval.protocol.tags import resolve_tag_ids


@pytest.fixture(scope="module")
def model_dir() -> Path:
    from pr1_eval.testing.tiny_model import cached_tiny_model

    return cached_tiny_model("random")


def _engine(model_dir: Path, **kw: Any) -> Any:
    from pr1_eval.engines.vllm_engine import VLLMEngine

    return VLLMEngine(str(model_dir), **kw)


def test_without_vllm_the_error_names_the_extra(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(Pr1EvalError, match=r"pip install 'pr1-eval\[vllm\]'"):
        _engine(model_dir)
    with pytest.raises(Pr1EvalError, match=r"pr1-eval\[vllm\]"):
        make_engine("vllm", str(model_dir))


def test_vllm_needs_python_311(model_dir: Path, fake_vllm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "version_info", (3, 10, 14, "final", 0))
    with pytest.raises(Pr1EvalError, match=r"needs Python >= 3\.11"):
        _engine(model_dir)
    assert fake_vllm.LLM.instances == []


def test_auto_picks_hf_without_cuda_and_drops_vllm_options(model_dir: Path, fake_vllm: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import pr1_eval.engines.hf as hf

    built: list[dict[str, Any]] = []

    class StubHF:
        name = "hf"

        def __init__(self, model_path: str, **kw: Any) -> None:
            built.append({"model": model_path, **kw})

    monkeypatch.setattr(hf, "HFEngine", StubHF)
    assert resolve_engine_name("auto") == "hf"  # fake vllm importable, but no CUDA here
    engine = make_engine("auto", str(model_dir), max_batch_size=8, tensor_parallel_size=2, gpu_memory_utilization=0.5)
    assert engine.name == "hf" and built == [{"model": str(model_dir), "max_batch_size": 8}]
    make_engine("hf", str(model_dir), max_batch_size=4)
    for value in (1, 2):  # a given option is meant, whatever its value (the vLLM default 1 included)
        with pytest.raises(Pr1EvalError, match="tensor_parallel_size do not apply to --engine hf"):
            make_engine("hf", str(model_dir), tensor_parallel_size=value)
    with pytest.raises(Pr1EvalError, match="unknown engine option"):
        make_engine("hf", str(model_dir), data_parallel_size=2)  # replaced by --ray --replicas
    with pytest.raises(Pr1EvalError, match="unknown --engine"):
        make_engine("sglang", str(model_dir))
    monkeypatch.setattr("pr1_eval.engines.factory.cuda_available", lambda: True)
    assert resolve_engine_name("auto") == "vllm"  # CUDA and vllm: the fast path


def test_llm_gets_prefix_caching_and_parallel_options(model_dir: Path, fake_vllm: Any) -> None:
    engine = make_engine("vllm", str(model_dir), tensor_parallel_size=2, gpu_memory_utilization=0.5,
                         max_model_len=512, max_batch_size=64)
    kwargs = fake_vllm.LLM.instances[-1].kwargs
    assert kwargs["enable_prefix_caching"] is True and kwargs["tensor_parallel_size"] == 2
    assert kwargs["gpu_memory_utilization"] == 0.5 and kwargs["max_model_len"] == 512
    assert "data_parallel_size" not in kwargs and "max_batch_size" not in kwargs
    info = engine.describe()
    assert info["backend"] == "vllm" and info["tensor_parallel_size"] == 2 and info["max_model_len"] == 512
    assert _engine(model_dir).max_model_len == 4096  # no --max-model-len: the length vLLM derived from the config


def test_one_request_per_problem_with_n_equal_k(model_dir: Path, fake_vllm: Any) -> None:
    engine = _engine(model_dir)
    sampling = SamplingConfig(max_new_tokens=50, seed=4, top_k=0)
    out = SequentialDecoder().decode(engine, [[10, 11], [12], [13, 14, 15]], 4, sampling, ["t/a", "t/b", "t/c"])
    (prompts, params), = fake_vllm.LLM.instances[-1].calls
    assert [p["prompt_token_ids"] for p in prompts] == [[10, 11], [12], [13, 14, 15]]
    assert [p.n for p in params] == [4, 4, 4]
    assert [p.seed for p in params] == [request_seed(4, r) for r in ("t/a", "t/b", "t/c")]
    assert all(p.skip_special_tokens is False and p.max_tokens == 50 and p.top_k == -1 for p in params)
    assert [len(samples) for samples in out] == [4, 4, 4]
    assert all(s.finish_reason == "eos" and len(s.token_ids) == 5 + j for samples in out for j, s in enumerate(samples))


def test_outputs_follow_the_engine_contract(model_dir: Path, fake_vllm: Any) -> None:
    engine = _engine(model_dir, record_logprobs=True)
    tags = resolve_tag_ids(engine.tokenizer)
    close = tags[T.PATH_CLOSE]
    eos = engine.tokenizer.eos_token_id

    def script(prompt: list[int], params: Any, index: int, rng: Any) -> Any:
        return [[30, tags[T.PARALLEL_OPEN], 31, close, 32], [30, 31, eos], [30] * 40, ([30, 31, 32], "abort"),
                ([33], "error")][index]

    fake_vllm.LLM.script = staticmethod(script)
    request = GenerationRequest("r", [10, 11], n=5, max_new_tokens=20, stop_token_ids=(close,), seed=1)
    a, b, c, d, e = engine.generate([request], SamplingConfig(seed=0))[0]
    assert (a.finish_reason, a.stop_token_id, a.token_ids[-1]) == ("stop", close, close)
    assert a.text == engine.tokenizer.decode(a.token_ids, skip_special_tokens=False)
    assert T.PARALLEL_OPEN in a.text and a.text.endswith(T.PATH_CLOSE)
    assert (b.finish_reason, b.token_ids) == ("eos", [30, 31])
    assert (c.finish_reason, len(c.token_ids)) == ("length", 20)
    assert (d.finish_reason, d.token_ids) == ("abort", [30, 31, 32])  # vLLM's abort is not an EOS
    assert (e.finish_reason, e.token_ids) == ("error", [33])
    assert a.logprobs is not None and len(a.logprobs) == len(a.token_ids) and len(b.logprobs or []) == 2
    (_, params), = fake_vllm.LLM.instances[-1].calls
    assert params[0].stop_token_ids == [close] and params[0].logprobs == 0 and params[0].seed == 1


def test_abort_reaches_the_stored_record(model_dir: Path, fake_vllm: Any) -> None:
    from pr1_eval.generate.runner import _record_finish

    engine = _engine(model_dir)
    fake_vllm.LLM.script = staticmethod(lambda prompt, params, index, rng: ([30, 31], "abort"))
    (sample,), = SequentialDecoder().decode(engine, [[10, 11]], 1, SamplingConfig(seed=0), ["t/a"])
    assert sample.finish_reason == "abort" and _record_finish(sample.finish_reason) == "abort"
    assert [_record_finish(r) for r in ("eos", "stop", "length", "error", "block_limit")] == \
        ["stop", "stop", "length", "error", "block_limit"]


def test_generation_config_eos_is_an_eos_not_a_stop_token(model_dir: Path, fake_vllm: Any, tmp_path: Path) -> None:
    from pr1_eval.testing.tiny_model import copy_tiny_model

    model = copy_tiny_model(model_dir, tmp_path / "m")
    eos = json.loads((model / "config.json").read_text())["eos_token_id"]
    end_of_turn = 7  # a second EOS, as Qwen3 lists <|im_end|> and <|endoftext|>
    (model / "generation_config.json").write_text(json.dumps({"eos_token_id": [eos, end_of_turn]}))
    engine = _engine(model)
    fake_vllm.LLM.script = staticmethod(lambda prompt, params, index, rng: [30, end_of_turn, 31])
    (c,), = engine.generate([GenerationRequest("r", [10], n=1, stop_token_ids=(5,))], SamplingConfig(seed=0))
    assert (c.finish_reason, c.token_ids, c.stop_token_id) == ("eos", [30], None)
    raw = fake_vllm.LLM.instances[-1].generate([{"prompt_token_ids": [10]}], fake_vllm.SamplingParams(max_tokens=9))
    assert (raw[0].outputs[0].finish_reason, raw[0].outputs[0].stop_reason) == ("stop", end_of_turn)  # what vLLM reports


def test_budget_is_clamped_to_the_model_length_and_empty_budgets_are_not_sent(model_dir: Path, fake_vllm: Any) -> None:
    engine = _engine(model_dir, max_model_len=8)
    out = engine.generate([GenerationRequest("a", [1] * 5, n=2), GenerationRequest("b", [1] * 8, n=1),
                           GenerationRequest("c", [1], n=1, max_new_tokens=0), GenerationRequest("d", [1] * 9, n=1)],
                          SamplingConfig(max_new_tokens=100))
    (prompts, params), = fake_vllm.LLM.instances[-1].calls
    assert len(prompts) == 1 and params[0].max_tokens == 3
    assert [c.finish_reason for c in out[1] + out[2] + out[3]] == ["length", "length", "length"] and len(out[0]) == 2


def test_a_prompt_at_the_model_length_is_a_length_completion_not_a_failed_call(model_dir: Path, fake_vllm: Any) -> None:
    engine = _engine(model_dir)  # no --max-model-len: 4096 from the model config, as vLLM derives it
    at_limit, fine = GenerationRequest("long", [12] * 4096, n=2), GenerationRequest("ok", [10, 11], n=2)
    with pytest.raises(fake_vllm.VLLMValidationError, match="at least 1"):  # what sending it would do: the whole call fails
        fake_vllm.LLM.instances[-1].generate([{"prompt_token_ids": [10, 11]}, {"prompt_token_ids": [12] * 4096}])
    long_out, ok_out = engine.generate([at_limit, fine], SamplingConfig(max_new_tokens=30, seed=0))
    assert [(c.finish_reason, c.token_ids) for c in long_out] == [("length", []), ("length", [])]
    assert [c.finish_reason for c in ok_out] == ["eos", "eos"]


def test_greedy_sends_one_request_and_returns_k_copies(model_dir: Path, fake_vllm: Any) -> None:
    with pytest.raises(fake_vllm.VLLMValidationError, match="n must be 1 when using greedy sampling"):
        fake_vllm.SamplingParams(n=4, temperature=0.0)
    engine = _engine(model_dir)
    out = SequentialDecoder().decode(engine, [[10, 11]], 4, SamplingConfig(temperature=0.0, max_new_tokens=30), ["t/a"])
    (_, params), = fake_vllm.LLM.instances[-1].calls
    assert [p.n for p in params] == [1]
    assert len(out[0]) == 4 and len({tuple(s.token_ids) for s in out[0]}) == 1 and out[0][0].token_ids


def test_sample_j_is_seeded_with_seed_plus_j(model_dir: Path, fake_vllm: Any) -> None:
    engine = _engine(model_dir)
    eos = engine.tokenizer.eos_token_id
    # like a model: the tokens depend on the prompt and the random stream, not on the sample's index
    fake_vllm.LLM.script = staticmethod(lambda prompt, params, index, rng: [20 + rng.randrange(30) for _ in range(8)] + [eos])
    sampling = SamplingConfig(max_new_tokens=40)
    together = engine.generate([GenerationRequest("a", [10, 11], n=3, seed=100)], sampling)[0]
    alone = [engine.generate([GenerationRequest("b", [10, 11], n=1, seed=100 + j)], sampling)[0][0] for j in range(3)]
    assert [c.token_ids for c in together] == [c.token_ids for c in alone]
    other_prompt = engine.generate([GenerationRequest("c", [10, 12], n=1, seed=100)], sampling)[0][0]
    assert other_prompt.token_ids != together[0].token_ids


def _build_in_child(model: str, conn: Any) -> None:
    try:
        _engine(Path(model))
        conn.send("ok")
    except BaseException as exc:  # report whatever happened to the parent
        conn.send(f"{type(exc).__name__}: {exc}")


@pytest.mark.parametrize("daemon", [True, False])
def test_an_engine_in_a_daemonic_process_fails_like_vllm(model_dir: Path, fake_vllm: Any, daemon: bool) -> None:
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe()
    process = context.Process(target=_build_in_child, args=(str(model_dir), child), daemon=daemon)
    process.start()
    answer = parent.recv() if parent.poll(120) else "no answer"
    process.join(30)
    if daemon:  # the old replica pool's daemon=True workers: every data-parallel run died at start
        assert "daemonic processes are not allowed to have children" in answer
    else:
        assert answer == "ok"


def test_forkjoin_runs_over_vllm(model_dir: Path, fake_vllm: Any) -> None:
    engine = _engine(model_dir)
    tags = resolve_tag_ids(engine.tokenizer)
    eos = engine.tokenizer.eos_token_id

    def script(prompt: list[int], params: Any, index: int, rng: Any) -> list[int]:
        last = prompt[-1]
        if last == tags[T.PATH_OPEN]:
            return [40 + index] * (2 + index) + [tags[T.PATH_CLOSE]]
        if last == tags[T.SUMMARY_OPEN]:
            return [50, tags[T.SUMMARY_CLOSE]]
        if prompt.count(tags[T.PARALLEL_OPEN]) < 1:
            return [30, tags[T.PARALLEL_OPEN]]
        return [60, 61, eos]

    fake_vllm.LLM.script = staticmethod(script)
    out = ForkJoinDecoder().decode(engine, [[10, 11], [12]], 3, SamplingConfig(max_new_tokens=60, seed=0), ["t/a", "t/b"])
    calls = fake_vllm.LLM.instances[-1].calls
    assert [p.n for p in calls[0][1]] == [3, 3]  # the first wave: one n=k request per problem
    assert any(all(p.n == 2 for p in params) for _, params in calls[1:])  # a path wave: n=paths per fork
    for s in (s for samples in out for s in samples):
        structure = parse_structure(s.text)
        assert structure.format_ok and structure.paths_per_block == [2], s.text


def test_a_call_tells_its_listener_each_finished_request_and_draws_no_bar(model_dir: Path, fake_vllm: Any,
                                                                          capfd: pytest.CaptureFixture[str]) -> None:
    """vLLM's ``use_tqdm`` callable: the run's display hears (done, total) completions as each
    request finishes (Σ n = 3 × 4, in steps of 4), and nothing of vLLM's own bar reaches stderr;
    with nobody listening, ``use_tqdm=False`` as before (no bar either)."""
    engine = _engine(model_dir)
    sampling = SamplingConfig(max_new_tokens=50, seed=4)
    heard: list[tuple[int, int]] = []
    engine.on_call_progress = lambda done, total: heard.append((done, total))
    out = SequentialDecoder().decode(engine, [[10, 11], [12], [13, 14, 15]], 4, sampling, ["t/a", "t/b", "t/c"])
    assert heard == [(0, 12), (4, 12), (8, 12), (12, 12)] and [len(s) for s in out] == [4, 4, 4]
    engine.on_call_progress = None
    SequentialDecoder().decode(engine, [[10, 11]], 4, sampling, ["t/a"])
    assert len(heard) == 4 and "Processed prompts" not in capfd.readouterr().err


def test_the_fake_draws_vllms_own_bar_by_default(model_dir: Path, fake_vllm: Any,
                                                 capfd: pytest.CaptureFixture[str]) -> None:
    """The fake keeps the real default (``use_tqdm=True``: vLLM's bar on stderr, counting the
    n-fanned completions), so the test above proves the engine turns it off or redirects it."""
    llm = fake_vllm.LLM(str(model_dir))
    llm.generate([{"prompt_token_ids": [10, 11]}, {"prompt_token_ids": [12]}], fake_vllm.SamplingParams(n=3, seed=1))
    err = capfd.readouterr().err
    assert "Rendering prompts" in err and "Processed prompts" in err and "6/6" in err


def test_a_run_on_vllm_prints_progress_lines_while_a_call_decodes(model_dir: Path, fake_vllm: Any, tmp_path: Path,
                                                                  capfd: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``run --engine vllm`` off a terminal: while the one call of the chunk decodes (1.5 s here),
    the heartbeat lines name it with its completions done out of 1 problem × k = 3, not only
    '0 engine calls, ETA unknown'; the last line counts all 3 generated and stored."""
    from pr1_eval.generate.config import RunConfig
    from pr1_eval.generate.runner import run_eval

    monkeypatch.setenv("FAKE_VLLM_DELAY_S", "1.5")
    monkeypatch.setenv("PR1_EVAL_PROGRESS_SECONDS", "0.3")
    run_eval(RunConfig(model=str(model_dir), tasks=["aime24"], k=3, limit=1, max_new_tokens=16, engine="vllm",
                       data_source="packaged", out=str(tmp_path / "run"), grade_workers=1))
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("[pr1-eval]")]
    assert any("engine call 1: 0/3 completions done, call ETA unknown" in line for line in lines), lines
    assert lines[-1].startswith("[pr1-eval] 3/3 samples (100%) generated, 3 stored, 1 engine calls;"), lines
    assert "Processed prompts" not in "\n".join(lines)
