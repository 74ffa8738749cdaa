"""transformers' own progress bars kept off pr1-eval's output.

Why: every ``run``, ``sweep`` and ``demo`` printed transformers' ``Loading weights: 100%|…| 24/24``
bar between pr1-eval's ``[pr1-eval]`` lines, and ``analyze`` a bare ``Loading weights … 103/103``
when it loaded the embedding model, with nothing saying what was loading. pr1-eval says what it
loads in its own words; the library's bar adds nothing. Only transformers' bars (weights
loading and saving) are switched off, and only while a model loads: huggingface_hub's download
bars (a model fetched from the hub can take minutes) are separate and stay.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def transformers_bars_off() -> Iterator[None]:
    """Switch transformers' progress bars off for the block, then back to how they were."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()
