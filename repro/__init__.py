"""repro: train Parallel-R1 Seen and Unseen checkpoints with VERL and score them with pr1-eval.

Everything here wraps VERL 0.9.1 (the ``repro`` extra) through its own extension points —
Hydra configs composed on VERL's, a custom reward function and reward manager, a registered
agent loop, and a training engine registered through ``model.external_lib`` — so that no VERL
trainer loop is copied. The reward is pr1-eval's grader and format check: the eval scorer is the
RL reward. See ``repro/README.md`` for the stage table and the deviations from the paper.
"""

__all__: list[str] = []
