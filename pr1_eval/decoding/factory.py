"""Build a decoding strategy from its CLI name: ``--decoding``, ``--paths``, ``--max-blocks``,
``--after-last-block`` and the fork-join path options (``--path-temperature``, ``--max-path-tokens``,
``--secondary-eos``).

:class:`DecodingSpec` is those options as one value: what a run's plan holds, what every Ray
replica builds its decoder from and what ``run.json`` describes, so the three cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pr1_eval.decoding.base import Decoder, SequentialDecoder
from pr1_eval.errors import Pr1EvalError
from pr1_eval.protocol.forkjoin import ForkJoinParams
from pr1_eval.protocol.paper_settings import PAPER_AFTER_LAST_BLOCK, PAPER_MAX_BLOCKS, PAPER_PATHS

DECODING_MODES: tuple[str, ...] = ("sequential", "forkjoin", "structured")
"""``--decoding``: one request per sample; the paper's fork-join rollout; one pass under the Unseen mask."""
#: Fork-join's path options: ``RunConfig`` fields and :class:`ForkJoinDecoder` arguments of these names.
PATH_OPTIONS: tuple[str, ...] = ("path_temperature", "max_path_tokens", "secondary_eos")


def path_options(config: Any) -> dict[str, Any]:
    """The :data:`PATH_OPTIONS` an object (a ``RunConfig``) carries."""
    return {name: getattr(config, name) for name in PATH_OPTIONS if hasattr(config, name)}


@dataclass(frozen=True)
class DecodingSpec:
    """The decoding mode and the protocol's parameters (paths, blocks, what follows the last block,
    the path options). ``params.budget`` is unused: the response budget is the run's
    ``max_new_tokens``."""

    mode: str = DECODING_MODES[0]
    params: ForkJoinParams = field(default_factory=ForkJoinParams)

    @classmethod
    def of(cls, config: Any) -> DecodingSpec:
        """The spec a ``RunConfig`` (``decoding``, ``paths``, ``max_blocks``, ``after_last_block``
        and the :data:`PATH_OPTIONS`) describes; an unknown mode is refused here."""
        if config.decoding not in DECODING_MODES:
            raise Pr1EvalError(f"unknown --decoding {config.decoding!r}; choose one of {', '.join(DECODING_MODES)}")
        params = ForkJoinParams(paths=config.paths, max_blocks=config.max_blocks,
                                after_last_block=config.after_last_block, **path_options(config))
        return cls(config.decoding, params)

    def decoder(self) -> Decoder:
        """The decoder this spec describes; fork-join gets :attr:`params` whole (no field unpacked and
        packed again on the way, so a new protocol parameter cannot be dropped here)."""
        if self.mode == "forkjoin":
            return _forkjoin(self.params)
        return make_decoder(self.mode, max_blocks=self.params.max_blocks, after_last_block=self.params.after_last_block)

    def describe(self) -> dict[str, Any]:
        """The decoder's description, as ``run.json`` records it."""
        return self.decoder().describe()


def make_decoder(
    mode: str,
    paths: int = PAPER_PATHS,
    max_blocks: int = PAPER_MAX_BLOCKS,
    after_last_block: str = PAPER_AFTER_LAST_BLOCK,
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
        unknown = set(path or {}) - set(PATH_OPTIONS)
        if unknown:
            raise Pr1EvalError(f"unknown fork-join path option(s) {', '.join(sorted(unknown))}")
        return _forkjoin(ForkJoinParams(paths=paths, max_blocks=max_blocks, after_last_block=after_last_block,
                                        **dict(path or {})))
    if mode == "structured":
        from pr1_eval.decoding.structured import StructuredDecoder

        return StructuredDecoder(max_blocks=max_blocks, after_last_block=after_last_block)
    raise Pr1EvalError(f"unknown --decoding {mode!r}; choose one of {', '.join(DECODING_MODES)}")


def _forkjoin(params: ForkJoinParams) -> Decoder:
    """Fork-join's decoder, built in this one place from its parameters whole (imported on use, as
    the structured decoder is, so building a spec loads neither)."""
    from pr1_eval.decoding.forkjoin import ForkJoinDecoder

    return ForkJoinDecoder.of(params)
