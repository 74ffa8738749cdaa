"""Generation engines: one interface (:class:`~pr1_eval.engines.base.Engine`), several backends."""
