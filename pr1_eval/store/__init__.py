"""The run store: a run folder's ``run.json`` and its durable ``samples.parquet`` parts
(:mod:`.run_store`)."""
