"""vllm.v1.engine.exceptions as in vLLM 0.32/0.33."""

from __future__ import annotations

from typing import Any

from vllm.exceptions import VLLMServerError


class EngineGenerateError(VLLMServerError):
    """Raised when a AsyncLLM.generate() fails. Recoverable."""


class EngineDeadError(VLLMServerError):
    """Raised when the EngineCore dies. Unrecoverable."""

    ENGINE_DEAD_MESSAGE = "EngineCore encountered an issue. See stack trace (above) for the root cause."

    def __init__(self, *args: Any, suppress_context: bool = False, **kwargs: Any) -> None:
        super().__init__(self.ENGINE_DEAD_MESSAGE, *args, **kwargs)
        self.__suppress_context__ = suppress_context
