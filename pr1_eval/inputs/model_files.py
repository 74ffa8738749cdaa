"""Which files make a folder a loadable Hugging Face model: one definition for every checker.

Why here: the run's preflight, the HF engine's tokenizer check and analysis's tokenizer lookup
each decide "is this a model folder"; with one list they cannot disagree about a folder (one
accepting ``tokenizer.model`` while another refuses it).
"""

from __future__ import annotations

#: Files any of which makes a folder's tokenizer loadable by ``AutoTokenizer``.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
#: Weight files of a Hugging Face model folder (glob patterns).
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model*.bin", "*.safetensors.index.json")
