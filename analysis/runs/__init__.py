"""The one way into runs: every analysis, dashboard page and notebook reads runs through here.

- :mod:`~analysis.runs.index`: run folders found under roots; a :class:`~analysis.runs.index.RunEntry`
  reads a run's file signature and ``run.json`` once and keeps them;
- :mod:`~analysis.runs.loader`: :func:`~analysis.runs.loader.load_runs`, the samples (by column)
  and blocks frames with declared columns, completeness checked once;
- :mod:`~analysis.runs.block_cache`: each run's parsed blocks kept per run state;
- :mod:`~analysis.runs.steps`: a training job's step runs as one table (the Training page);
- :mod:`~analysis.runs.trace`: a response cut into what the trace viewer shows;
- :mod:`~analysis.runs.tokens` and :mod:`~analysis.runs.notebooks`: token counts and the notebooks' runs.
"""
