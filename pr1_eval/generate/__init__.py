"""Generation: a run is planned once (:mod:`.plan`, every input read and checked by :mod:`.preflight`'s
validators before a model loads), then executed (:mod:`.runner`); a sweep (:mod:`.sweep`) plans the
shared inputs of a training job's checkpoints once and one run per checkpoint. The options are
:mod:`.config`'s ``RunConfig``.

The runner drives a decoder (:mod:`pr1_eval.decoding`, which follows :mod:`pr1_eval.protocol`) on an
engine (:mod:`pr1_eval.engines`), grades with :mod:`pr1_eval.grading` and stores through
:mod:`pr1_eval.store`.
"""
