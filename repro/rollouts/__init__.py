"""repro's rollout writer, in one folder: every scored rollout of an RL job stored as a pr1-eval run per step.

Why a folder: the three modules are one mechanism read together — :mod:`.records` turns one scored
rollout into the :class:`~pr1_eval.records.sample.SampleRecord` pr1-eval stores, :mod:`.journal`
keeps every admitted rollout on disk before it is buffered, and :mod:`.runs` is the writer the
reward manager hands rollouts to (one run per step, many writers, one ledger).
"""

__all__: list[str] = []
