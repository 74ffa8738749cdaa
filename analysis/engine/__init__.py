"""How the analysis's work runs and is kept: knowing nothing of blocks, paths or roles.

- :mod:`~analysis.engine.workers`: forked worker processes, sized by the project's one rule
  (:func:`pr1_eval.processes.default_workers`), and :class:`~analysis.engine.workers.Chunked` work;
- :mod:`~analysis.engine.tasks`: the one way to overlap: :func:`~analysis.engine.tasks.map_chunks`
  (a function mapped over items in the workers, ordered, chunked, optionally cached; a pending
  result back at once) and :func:`~analysis.engine.tasks.in_background` (a future);
- :mod:`~analysis.engine.cache`: one cache root and variable, one fingerprint rule, one atomic
  writer, healing of damaged entries; :mod:`~analysis.engine.shards` (values by key, one codec per
  kind: JSON, vectors), :mod:`~analysis.engine.frames` (tables per owner and state, parquet) and
  :mod:`~analysis.engine.outputs` (a whole analysis, keyed by its inputs) keep things there;
- :mod:`~analysis.engine.csv_text`: the CSV writer whose bytes are pandas' ``to_csv``'s;
- :mod:`~analysis.engine.collector`: Python's cyclic collector, off while big tables are built.

The rule ``tests/test_architecture.py`` keeps: ``engine`` imports nothing else from ``analysis``,
and only the orchestration modules (:data:`ORCHESTRATION` there) import ``engine``; the measures
(``stats``, ``drift``, ``roles``, ``conclusions``, ``diversity``, ``bleu``, ``paired``) are plain
functions. This ``__init__`` imports nothing: ``pr1-eval`` asks :mod:`~analysis.engine.outputs`
before anything heavy is loaded.
"""
