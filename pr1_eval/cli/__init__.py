"""The ``pr1-eval`` command: argument parsing (:mod:`.main`), the subcommands' implementations
(:mod:`.commands`) and the no-GPU demo (:mod:`.demo`)."""
