"""Token counting for path and summary lengths, with the run's own tokenizer when it is local.

Why the run's tokenizer: token lengths are only comparable with the token positions the
harness stored at generation time when both come from the same tokenizer. Imported runs and
runs whose model lives on the hub (not on this machine) get no tokenizer: their token lengths
stay null rather than being guessed with some other vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from pr1_eval.inputs.model_files import TOKENIZER_FILES
from pr1_eval.records.run import RunRecord

#: Counts the tokens of a text (no special tokens added).
TokenCounter = Callable[[str], int]


def auto_token_counter(run: RunRecord) -> TokenCounter | None:
    """A counter from the tokenizer in the run's local model folder, or ``None``."""
    path = run.model.path
    if not path:
        return None
    folder = Path(str(path)).expanduser()
    if not folder.is_dir() or not any((folder / name).is_file() for name in TOKENIZER_FILES):
        return None
    return _counter_for(str(folder.resolve()))


@lru_cache(maxsize=8)
def _counter_for(folder: str) -> TokenCounter | None:
    """Load a tokenizer once per folder (loading costs seconds; analyses reload runs often)."""
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except Exception:  # noqa: BLE001 - no usable tokenizer: token lengths stay null
        return None

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return count
