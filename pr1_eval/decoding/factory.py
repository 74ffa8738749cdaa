"""Build a decoding strategy from its CLI name: ``--decoding``, ``--paths``, ``--max-blocks``,
``--after-last-block``."""

from __future__ import annotations

from pr1_eval.decoding.base import Decoder, SequentialDecoder
from pr1_eval.errors import Pr1EvalError

DECODING_MODES: tuple[str, ...] = ("sequential", "forkjoin", "structured")


def make_decoder(mode: str, paths: int = 2, max_blocks: int = 4, after_last_block: str = "end") -> Decoder:
    """The decoder for ``mode``. ``paths`` matters for ``forkjoin``; ``max_blocks`` and
    ``after_last_block`` (the paper's block cap, :mod:`pr1_eval.protocol.forkjoin`) for ``forkjoin``
    and ``structured``. Sequential decoding applies no protocol (the model writes what it writes).

    ``structured`` needs the HF engine (it drives the transformers model itself); that is checked
    when it decodes, where the engine is known.
    """
    if mode == "sequential":
        return SequentialDecoder()
    if mode == "forkjoin":
        from pr1_eval.decoding.forkjoin import ForkJoinDecoder

        return ForkJoinDecoder(paths=paths, max_blocks=max_blocks, after_last_block=after_last_block)
    if mode == "structured":
        from pr1_eval.decoding.structured import StructuredDecoder

        return StructuredDecoder(max_blocks=max_blocks, after_last_block=after_last_block)
    raise Pr1EvalError(f"unknown --decoding {mode!r}; choose one of {', '.join(DECODING_MODES)}")
