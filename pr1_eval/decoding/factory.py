"""Build a decoding strategy from its CLI name: ``--decoding``, ``--paths``, ``--max-blocks``,
``--after-last-block`` and the fork-join path options (``--path-temperature``, ``--max-path-tokens``,
``--secondary-eos``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pr1_eval.decoding.base import Decoder, SequentialDecoder
from pr1_eval.errors import Pr1EvalError

DECODING_MODES: tuple[str, ...] = ("sequential", "forkjoin", "structured")
#: Fork-join's path options: ``RunConfig`` fields and :class:`ForkJoinDecoder` arguments of these names.
PATH_OPTIONS: tuple[str, ...] = ("path_temperature", "max_path_tokens", "secondary_eos")


def path_options(config: Any) -> dict[str, Any]:
    """The :data:`PATH_OPTIONS` an object (a ``RunConfig``, a replica spec) carries."""
    return {name: getattr(config, name) for name in PATH_OPTIONS if hasattr(config, name)}


def make_decoder(
    mode: str,
    paths: int = 2,
    max_blocks: int = 4,
    after_last_block: str = "end",
    path: Mapping[str, Any] | None = None,
) -> Decoder:
    """The decoder for ``mode``. ``paths`` matters for ``forkjoin``; ``max_blocks`` and
    ``after_last_block`` (the paper's block cap, :mod:`pr1_eval.protocol.forkjoin`) for ``forkjoin``
    and ``structured``; ``path`` (:data:`PATH_OPTIONS`) for ``forkjoin`` only (structured decoding
    samples every token at the run's temperature). Sequential decoding applies no protocol.

    ``structured`` needs the HF engine (it drives the transformers model itself); that is checked
    when it decodes, where the engine is known.
    """
    if mode == "sequential":
        return SequentialDecoder()
    if mode == "forkjoin":
        from pr1_eval.decoding.forkjoin import ForkJoinDecoder

        unknown = set(path or {}) - set(PATH_OPTIONS)
        if unknown:
            raise Pr1EvalError(f"unknown fork-join path option(s) {', '.join(sorted(unknown))}")
        return ForkJoinDecoder(paths=paths, max_blocks=max_blocks, after_last_block=after_last_block, **dict(path or {}))
    if mode == "structured":
        from pr1_eval.decoding.structured import StructuredDecoder

        return StructuredDecoder(max_blocks=max_blocks, after_last_block=after_last_block)
    raise Pr1EvalError(f"unknown --decoding {mode!r}; choose one of {', '.join(DECODING_MODES)}")
