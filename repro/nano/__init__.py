"""The nano curriculum: the paper's training recipe end to end on a tiny model, on CPU, through VERL.

``pr1-repro nano`` (:mod:`repro.nano.job`). The CPU pieces VERL needs live in ``repro.testing``
(:mod:`repro.testing.verl_cpu`, :mod:`repro.testing.cpu_rollout`) and are loaded only through
VERL's plugin hook in the job's child processes.
"""
