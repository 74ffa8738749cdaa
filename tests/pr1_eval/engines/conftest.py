"""Fixtures the OpenAI-compatible engine's test modules share: the tiny model a fake server serves, its
tokenizer, and a retry back-off short enough for tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pr1_eval.engines import openai_client
from pr1_eval.engines.hf import load_tokenizer
from pr1_eval.testing.tiny_model import cached_tiny_model


@pytest.fixture(scope="module")
def model() -> Path:
    return cached_tiny_model("random")


@pytest.fixture(scope="module")
def tok(model: Path) -> Any:
    return load_tokenizer(str(model))


@pytest.fixture
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries wait 10 ms, not the client's real back-off (a module asks for it with ``usefixtures``)."""
    monkeypatch.setattr(openai_client, "BACKOFF_S", 0.01)
