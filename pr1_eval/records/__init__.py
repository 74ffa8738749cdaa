"""The two records every stage shares: one :class:`~.sample.SampleRecord` per sample
(``samples.parquet``) and one run record per run (``run.json``, :mod:`.run`)."""
