"""From stored samples to numbers: pure metrics (:mod:`.metrics`), metric names (:mod:`.names`),
the completeness check every aggregator runs first (:mod:`.completeness`), the per-task report
(:mod:`.run_report`; every task of a run from its columns converted once, :mod:`.task_arrays`) and
its types (:mod:`.schema`), a stored run's report (:mod:`.load`) and the terminal table (:mod:`.table`)."""
