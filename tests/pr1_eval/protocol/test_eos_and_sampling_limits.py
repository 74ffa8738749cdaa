"""One EOS set on every engine, and sampling limits refused before a model loads.

EOS: a checkpoint without ``generation_config.json`` whose ``config.json`` names an EOS id that
differs from the tokenizer's. vLLM builds the generation config from ``config.json`` then
(``try_get_generation_config``) and stops on both ids; the expected set here is computed by hand
from the two files, and the HF engine, the vLLM engine (over the fake, which reads the files the
way vLLM's code does) and the RL rollout's loader must all give it — and both engines must end a
response at the config's id.

Sampling: the preflight validator is held against the fake ``SamplingParams``, a separate copy
of vLLM's ``_verify_args`` (same bounds, same messages, same exception class): over a grid of
values the preflight refuses exactly what the fake refuses; refusals are one line naming the
option, and come before the model (a folder that does not exist) is looked at.
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pr1_eval.engines.base import GenerationRequest, SamplingConfig
from pr1_eval.errors import Pr1EvalError
from pr1_eval.generate.runner import RunConfig
from pr1_eval.generate.sampling_limits import check_sampling_limits, sampling_limit_problem
from pr1_eval.protocol.eos import load_generation_config, model_eos_token_ids
from tests.support.deadlines import scaled

CONFIG_EOS = 45  # an ordinary word id: not a tag, not pad, not the tokenizer's <|im_end|>


@pytest.fixture(scope="module")
def no_generation_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pr1_eval.testing.tiny_model import cached_tiny_model, copy_tiny_model

    model = copy_tiny_model(cached_tiny_model("random"), tmp_path_factory.mktemp("eos") / "m")
    (model / "generation_config.json").unlink()
    config = json.loads((model / "config.json").read_text())
    config["eos_token_id"] = CONFIG_EOS
    (model / "config.json").write_text(json.dumps(config))
    return model


def _expected_eos(model: Path) -> set[int]:
    """By hand: the tokenizer's eos_token looked up in tokenizer.json, plus config.json's id."""
    name = json.loads((model / "tokenizer_config.json").read_text())["eos_token"]
    added = {t["content"]: t["id"] for t in json.loads((model / "tokenizer.json").read_text())["added_tokens"]}
    return {added[name], json.loads((model / "config.json").read_text())["eos_token_id"]}


def test_the_config_json_eos_joins_the_set_on_every_engine(no_generation_config: Path, fake_vllm: Any) -> None:
    from pr1_eval.engines.hf import HFEngine
    from pr1_eval.engines.vllm_engine import VLLMEngine

    model = no_generation_config
    expected = _expected_eos(model)
    assert len(expected) == 2 and CONFIG_EOS in expected
    assert load_generation_config(str(model)).eos_token_id == CONFIG_EOS  # what repro's rollout reads
    hf, vl = HFEngine(str(model), max_batch_size=4), VLLMEngine(str(model))
    assert hf.eos_token_ids == expected == vl.eos_token_ids
    assert set(model_eos_token_ids(str(model), hf.tokenizer)) == expected
    # Both engines end a response at config.json's id, and drop it as an EOS.
    assert (hf._to_completion([30, CONFIG_EOS, 31], set(), 10, None).finish_reason,
            hf._to_completion([30, CONFIG_EOS, 31], set(), 10, None).token_ids) == ("eos", [30])
    fake_vllm.LLM.script = staticmethod(lambda prompt, params, index, rng: [30, CONFIG_EOS, 31])
    (c,), = vl.generate([GenerationRequest("r", [10], n=1, stop_token_ids=(5,))], SamplingConfig(seed=0))
    assert (c.finish_reason, c.token_ids) == ("eos", [30])


def test_the_hf_engine_stops_generating_at_the_config_eos(no_generation_config: Path) -> None:
    """A model forced to write the config's EOS second: the HF engine ends there, not at the budget."""
    import torch

    from pr1_eval.engines.hf import HFEngine

    engine = HFEngine(str(no_generation_config), max_batch_size=4)
    head = engine.model.get_output_embeddings()
    calls = {"n": 0}

    def force(module: Any, args: Any, output: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        forced = torch.full_like(output, -1e9)
        forced[..., 30 if calls["n"] == 1 else CONFIG_EOS] = 0.0
        return forced

    handle = head.register_forward_hook(force)
    try:
        (c,), = engine.generate([GenerationRequest("r", [10, 11], n=1)], SamplingConfig(max_new_tokens=20, seed=0))
    finally:
        handle.remove()
    assert (c.finish_reason, c.token_ids) == ("eos", [30])


# ----------------------------------------------------------------------------------- sampling limits
TEMPERATURES = [-0.5, 0.0, 1e-6, 0.005, 0.7, 2.0, 2.0001, 3.0, math.inf, math.nan]
TOP_P = [-0.1, 0.0, 1e-9, 0.5, 1.0, 1.01]
TOP_K = [-2, -1, 0, 1, 40]
MAX_TOKENS = [-3, 0, 1, 3000]
N = [0, 1, 16, 16384, 16385]


def _fake_refuses(vllm: Any, n: int, temperature: float, top_p: float, top_k: int, max_tokens: int) -> bool:
    from vllm.exceptions import VLLMValidationError

    try:
        vllm.SamplingParams(n=n, temperature=temperature, top_p=top_p, top_k=top_k, max_tokens=max_tokens)
    except VLLMValidationError:
        return True
    return False


def test_preflight_refuses_exactly_what_vllm_refuses(fake_vllm: Any) -> None:
    cases = list(itertools.product(N, TEMPERATURES, TOP_P, TOP_K, MAX_TOKENS))
    refused = 0
    for n, t, p, k, m in cases:
        if t < 1e-5 and n > 1:  # greedy with -k > 1 is refused by its own rule; the engine would send n=1
            n = 1
        ours = sampling_limit_problem(temperature=t, top_p=p, top_k=k, max_new_tokens=m, n={"-k": n}, environ={})
        assert (ours is not None) == _fake_refuses(fake_vllm, n, t, p, k, m), (n, t, p, k, m, ours)
        refused += ours is not None
    assert 0 < refused < len(cases)


def test_the_fake_raises_vllms_class_and_message(fake_vllm: Any) -> None:
    from vllm.exceptions import VLLMClientError, VLLMValidationError

    with pytest.raises(VLLMValidationError) as caught:
        fake_vllm.SamplingParams(temperature=2.5)
    assert str(caught.value) == "temperature must be in [0, 2], got 2.5. (parameter=temperature, value=2.5)"
    assert isinstance(caught.value, VLLMClientError) and not isinstance(caught.value, ValueError)
    with pytest.raises(VLLMValidationError, match=r"top_p must be in \(0, 1\], got 0"):
        fake_vllm.SamplingParams(top_p=0.0)
    assert fake_vllm.SamplingParams(temperature=0.004).temperature == 0.01  # raised to _MAX_TEMP, as vLLM does


def _config(**changes: Any) -> RunConfig:
    return RunConfig(model="/no/such/model", tasks=["aime24"], k=changes.pop("k", 4), engine="hf", **changes)


@pytest.mark.parametrize(("changes", "says"), [
    ({"temperature": 2.5}, "--temperature 2.5: vLLM accepts a finite temperature in [0, 2]"),
    ({"top_p": 1.5}, "--top-p 1.5: vLLM accepts top_p in (0, 1]"),
    ({"top_p": 0.0}, "--top-p 0.0: vLLM accepts top_p in (0, 1]"),
    ({"top_k": -3}, "--top-k -3: vLLM accepts an integer top_k of at least 1, or 0 (or -1)"),
    ({"max_new_tokens": 0}, "--max-new-tokens 0: vLLM needs at least 1 new token"),
    ({"k": 20000}, "-k 20000: vLLM takes between 1 and 16384 samples per request"),
    ({"decoding": "forkjoin", "paths": 20000}, "--paths 20000: vLLM takes between 1 and 16384"),
])
def test_out_of_range_sampling_is_refused_before_the_model_is_looked_at(changes: dict[str, Any], says: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from pr1_eval.generate.plan import build_plan

    monkeypatch.delenv("VLLM_MAX_N_SEQUENCES", raising=False)
    config = _config(**changes)
    with pytest.raises(Pr1EvalError) as caught:
        check_sampling_limits(config)
    assert str(caught.value).startswith(says) and "\n" not in str(caught.value)
    with pytest.raises(Pr1EvalError, match="^" + says.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        build_plan(config)  # before the missing model folder is noticed
    check_sampling_limits(_config(temperature=0.0, k=1, top_k=-1))  # greedy and a disabled top-k are fine


def test_cli_refuses_a_temperature_above_two_in_one_line(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "pr1_eval.cli.main", "run", "--model", str(tmp_path / "none"), "--tasks", "aime24",
           "--temperature", "3", "--out", str(tmp_path / "run")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=scaled(300))
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--temperature 3.0: vLLM accepts a finite temperature in [0, 2]" in lines[0], done.stderr
    assert not (tmp_path / "run").exists()
