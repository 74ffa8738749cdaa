"""Which files make a folder a loadable Hugging Face model: one definition for every checker.

Why here: the run's preflight, the HF engine's tokenizer check and analysis's tokenizer lookup
each decide "is this a model folder"; with one list they cannot disagree about a folder (one
accepting ``tokenizer.model`` while another refuses it).
"""

from __future__ import annotations

from pathlib import Path

from pr1_eval.errors import Pr1EvalError

#: Files any of which makes a folder's tokenizer loadable by ``AutoTokenizer``.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
#: Weight files of a Hugging Face model folder (glob patterns).
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model*.bin", "*.safetensors.index.json")


def check_tokenizer_files(folder: Path, label: str = "model folder") -> None:
    """Refuse a folder without tokenizer files, with the fix. ``run`` (its preflight) and ``import
    --tokenizer`` both call this, so a folder one refuses the other refuses too: without the files,
    ``AutoTokenizer`` may still build an empty tokenizer from ``config.json``, and an import counted
    every response as 0 tokens with every block at position 0."""
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise Pr1EvalError(f"{label} {folder} has no tokenizer files (none of {', '.join(TOKENIZER_FILES)}); "
                           "copy them from the base model into that folder")
