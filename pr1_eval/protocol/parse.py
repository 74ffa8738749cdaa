"""The structure parser and format check, as part of the protocol.

The parser lives in :mod:`pr1_eval.structure` (the grader and the record annotator import it from
there); it is re-exported here so the token-level protocol can be read, and imported, in one place.
"""

from __future__ import annotations

from pr1_eval.structure import Block, Span, Structure, attach_token_positions, outside_paths, parse_structure

__all__ = ["Block", "Span", "Structure", "attach_token_positions", "outside_paths", "parse_structure"]
