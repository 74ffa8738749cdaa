"""Read a ``POST /completions`` answer strictly: every field the engine uses is checked for its
type and range, and a malformed one is a one-line error naming the server's fault.

Why strict: the answer comes from a process pr1-eval does not control (a server, a router, a
proxy). A token id of ``3.7`` silently cut to ``3``, an id past the vocabulary, an index ``"a"``, or
``choices: ["x"]`` must never become a stored sample or a traceback; they are the server's fault,
said once, with where it happened. What is optional in the OpenAI schema stays optional
(``token_ids``, ``stop_reason``/``matched_stop``, ``usage``, ``logprobs``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pr1_eval.errors import Pr1EvalError


@dataclass(frozen=True)
class Choice:
    """One choice as the server sent it (validated, nothing interpreted yet)."""

    index: int
    text: str
    token_ids: list[int] | None
    finish_reason: str | None
    stop_reason: int | str | None
    """vLLM's ``stop_reason`` or SGLang's ``matched_stop``: the stop id or string that fired, if said."""
    token_logprobs: list[float] | None


@dataclass(frozen=True)
class Answer:
    choices: list[Choice]
    prompt_tokens: int | None
    """``usage.prompt_tokens`` when the server reports it (how many tokens it read the prompt as)."""
    completion_tokens: int | None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Bad(Exception):
    def __init__(self, where: str, value: Any, wanted: str) -> None:
        super().__init__(f"{where} is {str(value)[:60]!r}, not {wanted}")


def _token_ids(value: Any, vocab_size: int, where: str) -> list[int] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise _Bad(where, value, "a list of token ids")
    for i, token in enumerate(value):
        if not _is_int(token) or not 0 <= token < vocab_size:
            raise _Bad(f"{where}[{i}]", token, f"a token id (an integer from 0 to {vocab_size - 1})")
    return list(value)


def _logprobs(value: Any, where: str) -> list[float] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _Bad(where, value, "an object with token_logprobs")
    values = value.get("token_logprobs")
    if values is None:
        return None
    if not isinstance(values, list):
        raise _Bad(f"{where}.token_logprobs", values, "a list of numbers")
    out: list[float] = []
    for i, v in enumerate(values):
        if v is None:
            out.append(float("nan"))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(float(v))
        else:
            raise _Bad(f"{where}.token_logprobs[{i}]", v, "a number or null")
    return out


def _choice(raw: Any, position: int, vocab_size: int) -> Choice:
    where = f"choices[{position}]"
    if not isinstance(raw, dict):
        raise _Bad(where, raw, "an object")
    index = raw.get("index", position)
    if not _is_int(index) or index < 0:
        raise _Bad(f"{where}.index", index, "an integer ≥ 0")
    text = raw.get("text")
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise _Bad(f"{where}.text", text, "a string")
    finish = raw.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise _Bad(f"{where}.finish_reason", finish, "a string")
    reason = raw.get("stop_reason", raw.get("matched_stop"))
    if reason is not None and not (_is_int(reason) or isinstance(reason, str)):
        raise _Bad(f"{where}.stop_reason", reason, "a token id or a string")
    ids = _token_ids(raw.get("token_ids"), vocab_size, f"{where}.token_ids")
    return Choice(index, text, ids, finish, reason, _logprobs(raw.get("logprobs"), f"{where}.logprobs"))


def _count(usage: Any, key: str) -> int | None:
    if not isinstance(usage, dict):
        return None
    value = usage.get(key)
    if value is None:
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not _is_int(value) or value < 0:
        raise _Bad(f"usage.{key}", value, "a count")
    return int(value)


def parse_answer(answer: Any, where: str, vocab_size: int) -> Answer:
    """The choices of ``answer`` (sorted by index) and its usage counts; a malformed field raises a
    one-line :class:`Pr1EvalError` naming the field, its value and the server at ``where``."""
    try:
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or not choices:
            raise _Bad("the answer", answer, "an object with a non-empty list of choices")
        parsed = sorted((_choice(c, i, vocab_size) for i, c in enumerate(choices)), key=lambda c: c.index)
        usage = answer.get("usage")
        return Answer(parsed, _count(usage, "prompt_tokens"), _count(usage, "completion_tokens"))
    except _Bad as exc:
        raise Pr1EvalError(f"{where} answered a malformed completion: {exc}; the server (or a proxy in front of it) "
                           "is not answering as an OpenAI-compatible completions API; check what --base-url "
                           "points at") from None
