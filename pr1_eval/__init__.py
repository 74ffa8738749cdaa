"""pr1-eval: evaluation, behaviour analysis and reproduction for LLMs that think in parallel."""

__version__ = "0.1.0"
