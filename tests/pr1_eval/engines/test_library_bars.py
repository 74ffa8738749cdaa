"""transformers' ``Loading weights`` bar stays off pr1-eval's output: the HF engine (``run``,
``sweep``, ``demo``) and the embedding model (``analyze``) load without it, the embedding load
says what it loads instead, and the bars are switched back on afterwards for whoever else uses
transformers in the process."""

from __future__ import annotations

import pytest


def _bar_enabled() -> bool:
    from transformers.utils import logging as hf_logging

    return bool(hf_logging.is_progress_bar_enabled())


def test_the_hf_engine_loads_without_the_bar(capfd: pytest.CaptureFixture[str]) -> None:
    from transformers.utils import logging as hf_logging

    from pr1_eval.engines.hf import HFEngine
    from pr1_eval.testing.tiny_model import cached_tiny_model

    model = cached_tiny_model("random")
    hf_logging.enable_progress_bar()
    capfd.readouterr()
    HFEngine(str(model), device="cpu", dtype="float32", max_batch_size=2)
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "it/s]" not in err
    assert _bar_enabled()  # restored
    # The bar is transformers' and shows without the switch (so the check above can fail).
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(str(model))
    assert "Loading weights" in capfd.readouterr().err


def test_the_embedding_model_says_what_loads_and_shows_no_bar(capfd: pytest.CaptureFixture[str]) -> None:
    from analysis.pipeline.scheduled import Embedder

    capfd.readouterr()
    embedder = Embedder(cache_dir=False)
    assert embedder.embed(["a path", "another path"]).shape[0] == 2
    err = capfd.readouterr().err
    assert "[pr1-eval] loading the embedding model all-MiniLM-L6-v2 for the paths' cosine similarity " \
           "(--no-embeddings skips it)" in err
    assert "[pr1-eval] embedding model loaded in " in err
    assert "Loading weights" not in err and "it/s]" not in err
