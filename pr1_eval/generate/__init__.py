"""Generation: ``pr1-eval run`` (:mod:`.runner`), the checks that run before a model loads
(:mod:`.preflight`) and a sweep over a training job's checkpoints (:mod:`.sweep`).

The runner drives a decoder (:mod:`pr1_eval.decoding`, which follows :mod:`pr1_eval.protocol`) on an
engine (:mod:`pr1_eval.engines`), grades with :mod:`pr1_eval.grading` and stores through
:mod:`pr1_eval.store`.
"""
