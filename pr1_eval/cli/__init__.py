"""The ``pr1-eval`` command: one module per command (its parser, help and handler, registered by
:mod:`.main`), the options the generating commands share (:mod:`.options`) and how help reads
(:mod:`.help`)."""
