"""What a run reads: the task registry and loader (:mod:`.tasks`), prompt templates (:mod:`.prompts`)
and where their files live (:mod:`.paths`, the packaged copies in ``pr1_eval/data/`` checked by sha256)."""
