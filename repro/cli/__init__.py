"""The ``pr1-repro`` command: one module per command (its parser and handler, registered by
:mod:`.main`, as :mod:`pr1_eval.cli` is laid out), and the input checks that ``add-tokens`` and
``run`` share (:mod:`.inputs`)."""
