"""repro's structured training engine (:mod:`repro.structured_actor`), built bare for CPU tests.

Shared by the engine-hook tests and the VERL batching tests, which both feed it micro-batches and
read what ``prepare_model_inputs`` makes of them: FSDP and distributed setup are skipped, and only
the attributes that method reads are set.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from repro.structured_actor import register


def engine_for(model: Any, tok: Any) -> Any:
    """The registered engine class, without FSDP/distributed init: only what prepare_model_inputs reads."""
    cls = register()
    engine: Any = object.__new__(cls)
    engine.model_config = SimpleNamespace(tokenizer=tok, hf_config=model.config)
    engine.pad_to_length = False
    engine.use_ulysses_sp = False
    engine._autocast_dtype = torch.float32
    return engine
