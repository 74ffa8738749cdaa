"""Test fixtures built in code, kept out of the runtime packages: the tiny Qwen3-architecture
Parallel-R1 look-alike (:mod:`.tiny_model`), the synthetic traces it learns (:mod:`.tiny_traces`)
and its deterministic training (:mod:`.tiny_training`).

Nothing in ``pr1_eval``'s evaluation path imports this package; ``pr1-eval demo`` and
``pr1-eval tiny-model`` do, because building the tiny model is what those commands are for.
"""
