"""The frozen control of "beats its start" is the start model as VERL's merger writes it, and the draw
benches' shortcuts run what a breakage changes and nothing else."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from pr1_eval.errors import Pr1EvalError
from repro.nano.merged_start import FOLDER, start_as_merged

ROOT = Path(__file__).resolve().parents[2]


def _checkpoint(folder: Path, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """A checkpoint folder with float weights of ``dtype``, an integer buffer and a config file."""
    folder.mkdir(parents=True)
    generator = torch.Generator().manual_seed(3)
    state = {"model.embed_tokens.weight": torch.randn(7, 5, generator=generator).to(dtype),
             "model.norm.weight": (1 + torch.randn(5, generator=generator) / 3).to(dtype),
             "model.position_ids": torch.arange(4)}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps({"dtype": str(dtype).split(".")[-1]}), encoding="utf-8")
    (folder / "tokenizer.json").write_text("{}", encoding="utf-8")
    return state


def test_a_float32_start_is_rounded_as_the_merger_rounds_and_the_rest_copied(tmp_path: Path) -> None:
    state = _checkpoint(tmp_path / "start", torch.float32)
    trained = tmp_path / "stage" / "global_step_8" / "hf"
    control = Path(start_as_merged(str(tmp_path / "start"), str(trained)))
    assert control == trained.parent / FOLDER
    rounded = load_file(str(control / "model.safetensors"))
    assert rounded.keys() == state.keys()
    for name, tensor in state.items():  # bfloat16 keeps float32's exponent and the top 7 mantissa bits
        expected = tensor.to(torch.bfloat16) if tensor.is_floating_point() else tensor
        assert rounded[name].dtype == expected.dtype and torch.equal(rounded[name], expected), name
    assert not torch.equal(rounded["model.embed_tokens.weight"].float(), state["model.embed_tokens.weight"])
    for name in ("config.json", "tokenizer.json"):
        assert (control / name).read_bytes() == (tmp_path / "start" / name).read_bytes()


def test_a_start_already_in_the_merged_dtype_is_its_own_control(tmp_path: Path) -> None:
    _checkpoint(tmp_path / "start", torch.bfloat16)
    trained = tmp_path / "stage" / "global_step_8" / "hf"
    assert start_as_merged(str(tmp_path / "start"), str(trained)) == str(tmp_path / "start")
    assert not (trained.parent / FOLDER).exists()


def test_a_start_without_weights_is_named(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty: no \\*.safetensors weights"):
        start_as_merged(str(tmp_path / "empty"), str(tmp_path / "stage" / "hf"))


def test_verl_s_merger_still_writes_bfloat16() -> None:
    """The control's rounding is VERL's merger's: if a VERL upgrade merges in another dtype, this says so
    (and :data:`repro.nano.merged_start.MERGER_DTYPE` must follow it)."""
    from repro.nano.merged_start import MERGER_DTYPE

    spec = importlib.util.find_spec("verl")  # the file, read without importing VERL (seconds of imports)
    assert spec is not None and spec.origin is not None
    source = (Path(spec.origin).parent / "model_merger" / "fsdp_model_merger.py").read_text(encoding="utf-8")
    assert f"tensor._local_tensor.{MERGER_DTYPE}()" in source and f"tensor.{MERGER_DTYPE}()" in source


def test_a_plan_stage_that_does_not_exist_is_named_before_any_work(tmp_path: Path) -> None:
    from repro.nano.job import run_nano

    with pytest.raises(Pr1EvalError, match="plan 'ci' has no stage unseen-s9; its stages: seen-sft, seen-gsm8k, unseen-s2"):
        run_nano(tmp_path / "out", plan="ci", only=["unseen-s9"])
    assert not (tmp_path / "out").exists()


def test_only_the_stages_a_breakage_touches_run() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_nano_draws import touched_stages

    assert touched_stages("nospans") == ["unseen-s2"]
    assert all(touched_stages(v) is None for v in ("ok", "lr0", "sign", "noadv"))
