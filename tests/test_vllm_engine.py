"""The vLLM engine against a fake ``vllm`` with the real offline interface (tests/fake_vllm).

What is checked: the LLM is built with prefix caching and the parallel/memory options; a problem
is one request with ``SamplingParams(n=k)``; per-request budget, stop ids and seed reach vLLM;
special tokens are kept; vLLM's outputs map onto the engine contract (stop token kept, EOS
dropped); fork-join runs over it; data parallelism spreads requests over worker processes with
disjoint GPU groups and returns exactly what one replica would; without vllm the error names the
extra; ``--engine auto`` falls back to HF without CUDA.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pr1_eval import tags as T
from pr1_eval.decoding.base import SequentialDecoder, request_seed
from pr1_eval.decoding.forkjoin import ForkJoinDecoder
from pr1_eval.engines.base import GenerationRequest, SamplingConfig
from pr1_eval.engines.factory import make_engine, resolve_engine_name
from pr1_eval.engines.vllm_dp import assign, gpu_groups
from pr1_eval.errors import Pr1EvalError
from pr1_eval.structure import parse_structure
from pr1_eval.structured import resolve_tag_ids

FAKE = Path(__file__).parent / "fake_vllm"


@pytest.fixture(scope="module")
def model_dir() -> Path:
    from pr1_eval.tiny_model import cached_tiny_model

    return cached_tiny_model("random")


@pytest.fixture()
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.syspath_prepend(str(FAKE))
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    import vllm

    vllm.LLM.instances.clear()
    vllm.LLM.script = staticmethod(vllm._default_script)
    yield vllm
    vllm.LLM.script = staticmethod(vllm._default_script)
    monkeypatch.delitem(sys.modules, "vllm", raising=False)


def _engine(model_dir: Path, **kw: Any) -> Any:
    from pr1_eval.engines.vllm_engine import VLLMEngine

    return VLLMEngine(str(model_dir), **kw)


def test_without_vllm_the_error_names_the_extra(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(Pr1EvalError, match=r"pip install 'pr1-eval\[vllm\]'"):
        _engine(model_dir)
    with pytest.raises(Pr1EvalError, match=r"pr1-eval\[vllm\]"):
        make_engine("vllm", str(model_dir))


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
    make_engine("hf", str(model_dir), max_batch_size=4, tensor_parallel_size=1, data_parallel_size=1)  # defaults: fine
    with pytest.raises(Pr1EvalError, match="do not apply to --engine hf"):
        make_engine("hf", str(model_dir), tensor_parallel_size=2)
    with pytest.raises(Pr1EvalError, match="unknown engine option"):
        make_engine("hf", str(model_dir), beam_width=3)
    with pytest.raises(Pr1EvalError, match="unknown --engine"):
        make_engine("sglang", str(model_dir))
    monkeypatch.setattr("pr1_eval.engines.factory.cuda_available", lambda: True)
    assert resolve_engine_name("auto") == "vllm"  # CUDA and vllm: the fast path


def test_llm_gets_prefix_caching_and_parallel_options(model_dir: Path, fake_vllm: Any) -> None:
    engine = make_engine("vllm", str(model_dir), tensor_parallel_size=2, gpu_memory_utilization=0.5,
                         max_model_len=512, max_batch_size=64, data_parallel_size=1)
    kwargs = fake_vllm.LLM.instances[-1].kwargs
    assert kwargs["enable_prefix_caching"] is True and kwargs["tensor_parallel_size"] == 2
    assert kwargs["gpu_memory_utilization"] == 0.5 and kwargs["max_model_len"] == 512
    assert "data_parallel_size" not in kwargs and "max_batch_size" not in kwargs
    info = engine.describe()
    assert info["backend"] == "vllm" and info["tensor_parallel_size"] == 2 and info["enable_prefix_caching"] is True


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

    def script(prompt: list[int], params: Any, index: int, rng: Any) -> list[int]:
        return [[30, tags[T.PARALLEL_OPEN], 31, close, 32], [30, 31, eos], [30] * 40][index]

    fake_vllm.LLM.script = staticmethod(script)
    request = GenerationRequest("r", [10, 11], n=3, max_new_tokens=20, stop_token_ids=(close,), seed=1)
    a, b, c = engine.generate([request], SamplingConfig(seed=0))[0]
    assert (a.finish_reason, a.stop_token_id, a.token_ids[-1]) == ("stop", close, close)
    assert a.text == engine.tokenizer.decode(a.token_ids, skip_special_tokens=False)
    assert T.PARALLEL_OPEN in a.text and a.text.endswith(T.PATH_CLOSE)
    assert (b.finish_reason, b.token_ids) == ("eos", [30, 31])
    assert (c.finish_reason, len(c.token_ids)) == ("length", 20)
    assert a.logprobs is not None and len(a.logprobs) == len(a.token_ids) and len(b.logprobs or []) == 2
    (_, params), = fake_vllm.LLM.instances[-1].calls
    assert params[0].stop_token_ids == [close] and params[0].logprobs == 0 and params[0].seed == 1


def test_budget_is_clamped_to_the_model_length_and_empty_budgets_are_not_sent(model_dir: Path, fake_vllm: Any) -> None:
    engine = _engine(model_dir, max_model_len=8)
    out = engine.generate([GenerationRequest("a", [1] * 5, n=2), GenerationRequest("b", [1] * 8, n=1),
                           GenerationRequest("c", [1], n=1, max_new_tokens=0)], SamplingConfig(max_new_tokens=100))
    (prompts, params), = fake_vllm.LLM.instances[-1].calls
    assert len(prompts) == 1 and params[0].max_tokens == 3
    assert [c.finish_reason for c in out[1] + out[2]] == ["length", "length"] and len(out[0]) == 2


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
    assert [len(prompts) for prompts, _ in calls] == [2, 6, 6, 6]  # main (n=k), paths (n=2), summary, main
    assert [p.n for p in calls[0][1]] == [3, 3] and all(p.n == 2 for p in calls[1][1])
    for s in (s for samples in out for s in samples):
        structure = parse_structure(s.text)
        assert structure.format_ok and structure.paths_per_block == [2], s.text
        assert s.engine_calls == 4 and s.critical_path_tokens == len(s.token_ids) - 4  # shorter path: <Path> 40 40 </Path>


def test_assign_keeps_a_problem_on_one_replica_and_balances() -> None:
    sticky: dict[str, int] = {}
    keys = ["a", "a", "b", "c", "d", "d"]
    picks = assign(keys, [10, 10, 5, 5, 8, 8], 2, sticky)
    assert picks[0] == picks[1] and picks[4] == picks[5]
    load = [sum(c for c, r in zip([10, 10, 5, 5, 8, 8], picks, strict=True) if r == rep) for rep in (0, 1)]
    assert abs(load[0] - load[1]) <= 6
    again = assign(["a", "d"], [1, 1], 2, sticky)
    assert again == [picks[0], picks[4]]  # later waves of a problem go back to its replica


def test_gpu_groups() -> None:
    assert gpu_groups(2, 2, "4,5,6,7") == ["4,5", "6,7"]
    assert gpu_groups(3, 1, None) == [None, None, None]  # no GPU known here: leave the environment alone
    with pytest.raises(Pr1EvalError, match="needs 4 GPUs"):
        gpu_groups(2, 2, "0,1")


def test_data_parallel_replicas_match_one_replica(model_dir: Path, fake_vllm: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "vllm.jsonl"
    monkeypatch.setenv("PYTHONPATH", f"{FAKE}:{Path(__file__).parents[1]}")
    monkeypatch.setenv("FAKE_VLLM_LOG", str(log))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    requests = [GenerationRequest(f"t/{i}#0/b0/main", [10 + i] * (i + 1), n=2, seed=i) for i in range(6)]
    sampling = SamplingConfig(max_new_tokens=30)
    single = _engine(model_dir).generate(requests, sampling)
    with _engine(model_dir, data_parallel_size=2, tensor_parallel_size=2) as engine:
        parallel = engine.generate(requests, sampling)
        assert engine.describe()["data_parallel_size"] == 2
    assert [[c.token_ids for c in cs] for cs in parallel] == [[c.token_ids for c in cs] for cs in single]
    events = [json.loads(line) for line in log.read_text().splitlines()]
    workers = {e["pid"]: e["cuda"] for e in events if e["event"] == "init" and e["cuda"] in ("0,1", "2,3")}
    assert sorted(workers.values()) == ["0,1", "2,3"]
    assert {e["pid"] for e in events if e["event"] == "generate"} >= set(workers)  # both replicas worked


def test_a_replica_that_fails_to_start_is_reported(model_dir: Path, fake_vllm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", f"{FAKE}:{Path(__file__).parents[1]}")
    monkeypatch.setenv("FAKE_VLLM_FAIL", "1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(Pr1EvalError, match="replica 0 failed to start: RuntimeError: CUDA out of memory"):
        _engine(model_dir, data_parallel_size=2)
