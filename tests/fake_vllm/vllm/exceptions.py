"""vllm.exceptions as in vLLM 0.32/0.33: the client/server split, and ``VLLMValidationError``
(a ``VLLMClientError``, not a ``ValueError``) whose ``str`` names the parameter and the value."""

from __future__ import annotations

from typing import Any


class VLLMError(Exception):
    """Base class for all vLLM-specific errors."""


class VLLMClientError(VLLMError):
    """Errors caused by the client request (4xx)."""


class VLLMServerError(VLLMError):
    """Errors caused by the server (5xx)."""


class VLLMValidationError(VLLMClientError):
    """Request validation failures."""

    def __init__(self, message: str, *, parameter: str | None = None, value: Any = None) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.value = value

    def __str__(self) -> str:
        base = super().__str__()
        extras = []
        if self.parameter is not None:
            extras.append(f"parameter={self.parameter}")
        if self.value is not None:
            extras.append(f"value={self.value}")
        return f"{base} ({', '.join(extras)})" if extras else base
