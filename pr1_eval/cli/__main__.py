"""``python -m pr1_eval.cli …`` is ``pr1-eval …``."""

from pr1_eval.cli.main import entry

entry()
