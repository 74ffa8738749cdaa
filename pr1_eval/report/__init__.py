"""From stored samples to numbers (the estimators and intervals themselves: :mod:`pr1_eval.stats`):
the completeness check every aggregator runs first (:mod:`.completeness`), the per-task report
(:mod:`.run_report`; every task of a run from its columns converted once, :mod:`.task_arrays`) and
its types (:mod:`.schema`), a stored run's report (:mod:`.load`) and the terminal table (:mod:`.table`)."""
