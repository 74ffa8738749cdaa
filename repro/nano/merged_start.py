"""The frozen start model as the trainer's merge would have written it: the control that makes "beats its start" exact.

**Why.** An RL stage's verdict (:mod:`repro.nano.gain`) samples the frozen start model and the trained
model. The trained model is the merged checkpoint, and VERL 0.9.1's FSDP model merger writes every
weight in bfloat16 whatever the training dtype (``verl/model_merger/fsdp_model_merger.py``: each shard
``.bfloat16()``; the merged ``config.json`` says so). A stage whose start is a float32 checkpoint (the
Unseen stage starts from the structured tiny model, trained here in float32) would then be compared
across a rounding: at learning rate 0 the merged model is the start rounded to bfloat16, not the start, and the two samplings the verdict's null assumes to come from one
model come from two (measured on a learning-rate-0 draw: every weight of the merged Unseen checkpoint
was the start's rounded to bfloat16, up to 0.004 apart). So the control is the start *as the merge
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
#: What the job's ``nano.json`` says its frozen control was (``frozen_control``): a draw without it compared
#: the start as it was stored (``bench_nano_draws.py --recheck`` recomputes it).
CONTROL = f"the start model as the merge writes it ({MERGER_DTYPE})"


def rounded_state(model_dir: Path) -> dict[str, torch.Tensor] | None:
    """The start's tensors with every floating one rounded to :data:`MERGER_DTYPE`, or ``None`` when the
    checkpoint's floating tensors are all in that dtype already (nothing to round)."""
    import torch
    from safetensors.torch import load_file

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{model_dir}: no *.safetensors weights (the start model of an RL stage must be a "
                                "Hugging Face checkpoint folder)")
    state: dict[str, torch.Tensor] = {}
    for path in files:
        state.update(load_file(str(path)))
    target = getattr(torch, MERGER_DTYPE)
    if all(t.dtype == target for t in state.values() if t.is_floating_point()):
        return None
    return {name: t.to(target) if t.is_floating_point() else t for name, t in state.items()}


def start_as_merged(start_model: str, trained_model: str) -> str:
    """The folder to sample as the frozen start: ``start_model`` itself when its weights are what the merge
    writes, else a copy beside ``trained_model`` (``<trained>/../start_as_merged``) whose weights are the
    start's rounded as the merge rounds them (every other file copied as it is). Rewritten on every call:
    the copy is a function of the start alone."""
    from safetensors.torch import save_file

    source = Path(start_model)
    rounded = rounded_state(source)
    if rounded is None:
        return start_model
    out = Path(trained_model).parent / FOLDER
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for path in source.iterdir():
        if path.is_file() and path.suffix != ".safetensors" and path.name != "model.safetensors.index.json":
            shutil.copy2(path, out / path.name)
    save_file({k: v.contiguous() for k, v in rounded.items()}, str(out / "model.safetensors"), metadata={"format": "pt"})
    return str(out)
