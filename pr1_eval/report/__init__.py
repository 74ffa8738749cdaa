"""From stored samples to numbers: pure metrics (:mod:`.metrics`), the completeness check every
aggregator runs first (:mod:`.completeness`) and the per-task report (:mod:`.run_report`)."""
