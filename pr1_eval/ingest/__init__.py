"""Generations made elsewhere become runs, graded like ours: JSON Lines (:mod:`.importer`) and
lm-eval's ``--log_samples`` output (:mod:`.lm_eval_import`)."""
