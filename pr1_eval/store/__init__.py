"""The run store: a run folder's ``run.json`` and its durable ``samples.parquet`` parts
(:mod:`.run_store`), and the one rule for a command that creates a run folder: never over a run
(:mod:`.out_folder`)."""
