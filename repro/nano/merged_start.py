"""The frozen start model as the trainer's merge would have written it: the control that makes "beats its start" exact.

**Why.** An RL stage's verdict (:mod:`repro.nano.gain`) samples the frozen start model and the trained
model. The trained model is the merged checkpoint, and VERL 0.9.1's FSDP model merger writes every
weight in bfloat16 whatever the training dtype (``verl/model_merger/fsdp_model_merger.py``: each shard
``.bfloat16()``; the merged ``config.json`` says so). A stage whose start is a float32 checkpoint (the
Unseen stage starts from the structured tiny model, trained here in float32) would then be compared
across a rounding: at learning rate 0 the merged model is the start rounded to bfloat16, not the
start, and the two samplings the verdict's null assumes to come from one model come from two
(measured on a learning-rate-0 draw: every weight of the merged Unseen checkpoint was the start's
rounded to bfloat16, up to 0.004 apart). So the control is the start *as the merge
writes it*: a stage that learns nothing is then compared with bit-identical weights, and its z is the
null's (mean 0, SD 1) exactly. A start already in bfloat16 (the Seen stage starts from the Seen SFT's
merged checkpoint) is its own rounding and is used as it is.

The sampling upcasts both to float32 (:func:`repro.nano.targets.sample_responses`), so the rounding is
the only difference this removes.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

#: The dtype VERL's FSDP merger writes (see the module docstring).
MERGER_DTYPE = "bfloat16"
#: The folder, beside the trained checkpoint, that holds the rounded start.
FOLDER = "start_as_merged"
#: The folder, beside the trained checkpoint, that holds the start after weight decay alone (:func:`decayed_as_merged`).
DECAYED_FOLDER = "decayed_as_merged"
#: The actor's AdamW weight decay: VERL 0.9.1's default (``actor.optim.weight_decay``), which the nano job keeps.
WEIGHT_DECAY = 0.01
#: The dtype the actor's weights live in while training (VERL's FSDP worker keeps float32 master weights).
MASTER_DTYPE = "float32"
#: What the job's ``nano.json`` says its frozen control was (``frozen_control``): a draw without it compared
#: the start as it was stored (``bench_nano_draws.py --recheck`` recomputes it).
CONTROL = f"the start model as the merge writes it ({MERGER_DTYPE})"


def load_weights(model_dir: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint folder's ``*.safetensors`` files; a folder without any is named."""
    from safetensors.torch import load_file

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{model_dir}: no *.safetensors weights (the start model of an RL stage must be a "
                                "Hugging Face checkpoint folder)")
    state: dict[str, torch.Tensor] = {}
    for path in files:
        state.update(load_file(str(path)))
    return state


def rounded_state(model_dir: Path) -> dict[str, torch.Tensor] | None:
    """The start's tensors with every floating one rounded to :data:`MERGER_DTYPE`, or ``None`` when the
    checkpoint's floating tensors are all in that dtype already (nothing to round)."""
    import torch

    state = load_weights(model_dir)
    target = getattr(torch, MERGER_DTYPE)
    if all(t.dtype == target for t in state.values() if t.is_floating_point()):
        return None
    return {name: t.to(target) if t.is_floating_point() else t for name, t in state.items()}


def start_as_merged(start_model: str, trained_model: str) -> str:
    """The folder to sample as the frozen start: ``start_model`` itself when its weights are what the merge
    writes, else a copy beside ``trained_model`` (``<trained>/../start_as_merged``) whose weights are the
    start's rounded as the merge rounds them (every other file copied as it is). Rewritten on every call:
    the copy is a function of the start alone."""
    source = Path(start_model)
    rounded = rounded_state(source)
    if rounded is None:
        return start_model
    return _write_beside(source, Path(trained_model).parent / FOLDER, rounded)


def _write_beside(source: Path, out: Path, state: dict[str, torch.Tensor]) -> str:
    """``out`` made afresh: ``state`` as its one weights file, every other file of ``source`` copied as it is."""
    from safetensors.torch import save_file

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for path in source.iterdir():
        if path.is_file() and path.suffix != ".safetensors" and path.name != "model.safetensors.index.json":
            shutil.copy2(path, out / path.name)
    save_file({k: v.contiguous() for k, v in state.items()}, str(out / "model.safetensors"), metadata={"format": "pt"})
    return str(out)


def decayed_state(model_dir: Path, lr: float, optimiser_steps: int) -> dict[str, torch.Tensor]:
    """The start's tensors after ``optimiser_steps`` AdamW steps whose gradients are all zero, as merged.

    **Why this is exact.** With a zero gradient AdamW's moments stay zero, so its update is
    ``0 / (0 + eps) = 0``; what remains is the decoupled weight decay, ``p.mul_(1 - lr * weight_decay)``
    on the float32 master weight, once per optimiser step (torch's AdamW; the scalar is applied in the
    tensor's dtype). The merge then rounds to :data:`MERGER_DTYPE`. Replaying exactly that, step by step
    in float32, gives the merged checkpoint of a zero-advantage stage bit for bit (checked on a real
    zero-advantage draw: all 298,560 weights of the Unseen stage; one step more or fewer differs in ~550,
    and the same decay computed in float64 in 20)."""
    import torch

    master, merged = getattr(torch, MASTER_DTYPE), getattr(torch, MERGER_DTYPE)
    state = load_weights(model_dir)
    for name, tensor in state.items():
        if tensor.is_floating_point():
            weight = tensor.to(master)
            for _ in range(optimiser_steps):
                weight.mul_(1 - lr * WEIGHT_DECAY)
            state[name] = weight.to(merged)
    return state


def decayed_as_merged(start_model: str, trained_model: str, lr: float, optimiser_steps: int) -> str:
    """A copy of ``start_model`` beside ``trained_model`` (``<trained>/../decayed_as_merged``) holding
    :func:`decayed_state`: the merged checkpoint a stage with zero advantages writes (the trainer broken
    on purpose by ``noadv``), every other file copied as it is. Rewritten on every call."""
    source = Path(start_model)
    return _write_beside(source, Path(trained_model).parent / DECAYED_FOLDER, decayed_state(source, lr, optimiser_steps))
