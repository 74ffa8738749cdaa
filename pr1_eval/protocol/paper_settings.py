"""The paper's evaluation settings, defined once: every default that says "as the paper" reads it.

Why one home: the same five numbers (k 16, a 3000-token budget, 2 paths, 4 blocks, temperature
1.0) would otherwise be retyped in the CLI options, the run config, the decoders, the Ray replica spec,
the lm-eval hooks and the training CLI, and a change in one place would leave the others silently
different. The fork-join specifics (path temperature, per-path cap, what follows the last block,
a second EOS) are the official rollout's; they are defined here too, and
:mod:`pr1_eval.protocol.forkjoin` (whose defaults they are) imports them, so a reader finds every
paper default in one file and this module imports nothing.

Sources: DESIGN.md (Mean@16/Pass@16 at temperature 1.0, top-p 1.0, 3000 new tokens, the
``parallel_r1_v3`` prompt) and the official Parallel-R1 rollout (2 paths, at most 4 blocks).
The paper's per-task k (MATH300 at Mean@1) is a property of each task:
:attr:`pr1_eval.inputs.tasks.TaskSpec.paper_k`.
"""

from __future__ import annotations

#: Samples per problem (Mean@16, Pass@16).
PAPER_K = 16
#: Response budget in new tokens.
PAPER_MAX_NEW_TOKENS = 3000
#: Sampling temperature and nucleus of every response.
PAPER_TEMPERATURE = 1.0
PAPER_TOP_P = 1.0
#: Paths per ``<Parallel>`` block and blocks per response in the fork-join rollout.
PAPER_PATHS = 2
PAPER_MAX_BLOCKS = 4
#: The prompt template of the paper's evaluation.
PAPER_PROMPT = "parallel_r1_v3"
#: Fork-join path sampling of the official rollout: every path at temperature 1.0 whatever the
#: run's, each capped at 4096 tokens (its ``max_path_response_length``).
PAPER_PATH_TEMPERATURE = 1.0
PAPER_MAX_PATH_TOKENS = 4096
#: After the last allowed block's summary the response ends; a second EOS id inside a path or
#: summary is kept and the closing tag appended (:data:`pr1_eval.protocol.forkjoin.AFTER_LAST_BLOCK`
#: and :data:`~pr1_eval.protocol.forkjoin.SECONDARY_EOS` list the alternatives).
PAPER_AFTER_LAST_BLOCK = "end"
PAPER_SECONDARY_EOS = "keep"

__all__ = ["PAPER_AFTER_LAST_BLOCK", "PAPER_K", "PAPER_MAX_BLOCKS", "PAPER_MAX_NEW_TOKENS", "PAPER_MAX_PATH_TOKENS",
           "PAPER_PATHS", "PAPER_PATH_TEMPERATURE", "PAPER_PROMPT", "PAPER_SECONDARY_EOS", "PAPER_TEMPERATURE",
           "PAPER_TOP_P"]
