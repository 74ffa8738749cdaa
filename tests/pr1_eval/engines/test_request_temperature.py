"""A request's own temperature (fork-join paths at 1.0) and a second EOS asked for as a stop token,
on the vLLM engine (against the fake ``vllm``) and the HF engine (tiny model, ``generate`` observed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pr1_eval.decoding.forkjoin import secondary_eos_ids
from pr1_eval.engines.base import GenerationRequest, SamplingConfig, request_sampling
from pr1_eval.protocol import tags as T
from pr1_eval.protocol.tags import resolve_tag_ids


@pytest.fixture(scope="module")
def model_dir() -> Path:
    from pr1_eval.testing.tiny_model import cached_tiny_model

    return cached_tiny_model("random")


def test_request_sampling_overrides_only_the_temperature() -> None:
    run = SamplingConfig(temperature=0.0, top_p=0.9, seed=3)
    assert request_sampling(GenerationRequest("r", [1]), run) is run
    assert request_sampling(GenerationRequest("r", [1], temperature=1.0), run) == SamplingConfig(1.0, 0.9, 0, 3000, 3)


def test_vllm_paths_at_temperature_one_under_a_greedy_run(model_dir: Path, fake_vllm: Any) -> None:
    from pr1_eval.engines.vllm_engine import VLLMEngine

    engine = VLLMEngine(str(model_dir))
    requests = [GenerationRequest("main", [10], n=1), GenerationRequest("path", [10], n=2, temperature=1.0)]
    main, path = engine.generate(requests, SamplingConfig(temperature=0.0, seed=0))
    (_, params), = fake_vllm.LLM.instances[-1].calls
    assert [(p.temperature, p.n) for p in params] == [(0.0, 1), (1.0, 2)]
    assert len(main) == 1 and len(path) == 2


def test_vllm_second_eos_as_a_stop_is_kept(model_dir: Path, fake_vllm: Any, tmp_path: Path) -> None:
    """Fork-join asks for the generation config's extra EOS as a stop token of path requests; vLLM
    reports it as the stop reason, and the engine keeps it (a ``stop``), so the machine can keep it
    and append ``</Path>`` as the official loop does."""
    from pr1_eval.engines.vllm_engine import VLLMEngine
    from pr1_eval.testing.tiny_model import copy_tiny_model

    model = copy_tiny_model(model_dir, tmp_path / "m")
    eos = json.loads((model / "config.json").read_text())["eos_token_id"]
    end_of_turn = 7
    (model / "generation_config.json").write_text(json.dumps({"eos_token_id": [eos, end_of_turn]}))
    engine = VLLMEngine(str(model))
    assert secondary_eos_ids(engine) == {end_of_turn} - {engine.tokenizer.eos_token_id}
    close = resolve_tag_ids(engine.tokenizer)[T.PATH_CLOSE]
    fake_vllm.LLM.script = staticmethod(lambda prompt, params, index, rng: [30, end_of_turn, 31])
    request = GenerationRequest("p", [10], n=1, stop_token_ids=(close, end_of_turn), temperature=1.0)
    (c,), = engine.generate([request], SamplingConfig(seed=0))
    assert (c.finish_reason, c.token_ids, c.stop_token_id) == ("stop", [30, end_of_turn], end_of_turn)


def test_hf_groups_requests_by_their_temperature(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pr1_eval.engines.hf import HFEngine

    engine = HFEngine(str(model_dir), device="cpu")
    seen: list[tuple[bool, float | None, int]] = []
    original = engine.model.generate

    def observed(*args: Any, **kwargs: Any) -> Any:
        seen.append((kwargs["do_sample"], kwargs["temperature"], int(kwargs["input_ids"].shape[0])))
        return original(*args, **kwargs)

    monkeypatch.setattr(engine.model, "generate", observed)
    requests = [GenerationRequest("a", [10, 11], n=1, max_new_tokens=3),
                GenerationRequest("b", [10, 12], n=2, max_new_tokens=3, temperature=1.0),
                GenerationRequest("c", [10, 13], n=1, max_new_tokens=3)]
    out = engine.generate(requests, SamplingConfig(temperature=0.0, seed=0))
    assert sorted(seen, key=str) == sorted([(False, None, 2), (True, 1.0, 2)], key=str)
    assert [len(c) for c in out] == [1, 2, 1]

