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


def _checkpoint(folder: Path, dtype: torch.dtype, rows: int = 7) -> dict[str, torch.Tensor]:
    """A checkpoint folder with float weights of ``dtype``, an integer buffer and a config file."""
    folder.mkdir(parents=True)
    generator = torch.Generator().manual_seed(3)
    state = {"model.embed_tokens.weight": torch.randn(rows, 5, generator=generator).to(dtype),
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


def test_the_zero_advantage_checkpoint_is_what_torch_s_adamw_writes_from_zero_gradients(tmp_path: Path) -> None:
    """The replayed decay against torch's own AdamW: zero gradients for the stage's optimiser steps on float32
    master weights, then the merge's rounding; a bfloat16 start comes back as it was (the decay is below
    its rounding), a float32 one moves."""
    from repro.nano.merged_start import DECAYED_FOLDER, WEIGHT_DECAY, decayed_as_merged

    lr, steps = 1e-3, 32
    for dtype in (torch.float32, torch.bfloat16):
        start = tmp_path / str(dtype)
        state = _checkpoint(start, dtype, rows=400)  # 2,000 values: some of them move past a bfloat16 rounding
        masters = [torch.nn.Parameter(t.to(torch.float32).clone()) for t in state.values() if t.is_floating_point()]
        optimiser = torch.optim.AdamW(masters, lr=lr, weight_decay=WEIGHT_DECAY)
        for _ in range(steps):
            for weight in masters:
                weight.grad = torch.zeros_like(weight)
            optimiser.step()
        trained = tmp_path / f"stage-{dtype}" / "global_step_8" / "hf"
        out = Path(decayed_as_merged(str(start), str(trained), lr, steps))
        assert out == trained.parent / DECAYED_FOLDER and (out / "config.json").is_file()
        computed = load_file(str(out / "model.safetensors"))
        floating = [name for name, t in state.items() if t.is_floating_point()]
        for name, master in zip(floating, masters, strict=True):
            assert torch.equal(computed[name], master.detach().to(torch.bfloat16)), (dtype, name)
        moved = [name for name in floating if not torch.equal(computed[name], state[name].to(torch.bfloat16))]
        assert (moved == []) == (dtype == torch.bfloat16) and (dtype == torch.bfloat16 or "model.embed_tokens.weight" in moved)
        assert torch.equal(computed["model.position_ids"], state["model.position_ids"])


def test_the_decay_replayed_is_verl_s_actor_default_and_its_step_count() -> None:
    """The computed zero-advantage draw assumes VERL's actor AdamW (weight decay 0.01, constant learning
    rate, one PPO epoch): read from VERL's own config, so an upgrade that changes them is named here."""
    import yaml

    from repro.nano.merged_start import WEIGHT_DECAY
    from repro.nano.plan import PLANS, Scale, optimiser_steps

    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.origin is not None
    actor = yaml.safe_load((Path(spec.origin).parent / "trainer" / "config" / "actor" / "actor.yaml").read_text())
    assert actor["optim"]["weight_decay"] == WEIGHT_DECAY and actor["ppo_epochs"] == 1
    assert actor["optim"]["lr_warmup_steps_ratio"] == 0.0 and actor["optim"]["lr_warmup_steps"] <= 0
    unseen = next(s for s in PLANS["ci"] if s.name == "unseen-s2")
    assert optimiser_steps(unseen, Scale()) == unseen.steps * 4 == 32
