"""Where the benchmark data, prompt templates and training sets live, and whether the packaged
copies are intact.

The six benchmark files and the paper's two prompt templates ship inside the package
(``pr1_eval/data/``, 1.7 MB, provenance in ``pr1_eval/data/README.md``), so a fresh clone or a
plain ``pip install`` evaluates with no data folder beside it and no network. Each packaged
file's sha256 is listed in ``pr1_eval/data/MANIFEST.json`` and checked before the file is read:
a file edited by hand would otherwise change every score silently.

Benchmarks: ``--data-dir`` → ``$PR1_DATA_DIR`` → the packaged copy → the Hugging Face hub (for a
task whose file is not packaged, or when asked with ``--data-source hub``). The resolution lives
in :func:`pr1_eval.inputs.tasks.load_task`; this module answers "which folder did the user name".

Prompts: ``--prompt FILE``, else a named template from ``$PR1_PROMPTS_DIR``, else from a
``prompts/`` folder beside an explicit data folder (a data folder laid out like
``shared/data``), else the packaged copy (:func:`pr1_eval.inputs.prompts.load_template`).

Training sets (11 MB, and only ``pr1-repro data`` reads them) are not packaged:
``$PR1_TRAINING_DIR``, a ``training/`` folder beside an explicit data folder, or a
``shared/data/training`` folder beside the checkout.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pr1_eval.errors import Pr1EvalError

DATA_DIR_ENV = "PR1_DATA_DIR"
PROMPTS_DIR_ENV = "PR1_PROMPTS_DIR"
TRAINING_DIR_ENV = "PR1_TRAINING_DIR"
PACKAGED_DATA = Path(__file__).resolve().parents[1] / "data"
MANIFEST_NAME = "MANIFEST.json"
PACKAGED_PREFIX = "packaged:"

_verified: dict[tuple[str, int, int], str] = {}


def packaged_benchmarks_dir() -> Path:
    """The benchmark folder inside the installed package."""
    return PACKAGED_DATA / "benchmarks"


def packaged_prompts_dir() -> Path:
    """The prompt-template folder inside the installed package."""
    return PACKAGED_DATA / "prompts"


def file_sha256(path: Path) -> str:
    """A file's sha256 (hex), read in 1 MiB blocks: the one file hash of the project (packaged data, model
    wheels, training dumps)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(root: Path | None = None) -> dict[str, dict[str, Any]]:
    """``{relative path: {"sha256", "bytes"}}`` of the packaged data (``root`` defaults to the package's)."""
    path = (root or PACKAGED_DATA) / MANIFEST_NAME
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError) as exc:
        raise Pr1EvalError(
            f"{path}: the packaged data manifest is missing or unreadable ({type(exc).__name__}); reinstall pr1-eval"
        ) from None
    return dict(files)


def is_packaged(relpath: str, root: Path | None = None) -> bool:
    """Whether ``relpath`` (e.g. ``benchmarks/aime24.jsonl``) ships with the package."""
    return relpath in read_manifest(root)


def verified_packaged_file(relpath: str, root: Path | None = None) -> Path:
    """The packaged file ``relpath`` after checking its sha256 against the manifest.

    A missing or modified file is an error naming it: evaluating on silently edited data would
    make every number incomparable with runs on the shipped copy.
    """
    root = root or PACKAGED_DATA
    manifest = read_manifest(root)
    if relpath not in manifest:
        raise Pr1EvalError(f"{relpath} is not packaged with pr1-eval (packaged: {', '.join(sorted(manifest))})")
    path = root / relpath
    if not path.is_file():
        raise Pr1EvalError(f"packaged data file {path} is missing; reinstall pr1-eval, or pass --data-dir")
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    actual = _verified.get(key) or file_sha256(path)
    expected = str(manifest[relpath]["sha256"])
    if actual != expected:
        raise Pr1EvalError(
            f"packaged data file {path} was modified: its sha256 is {actual}, {MANIFEST_NAME} says {expected}; "
            f"restore it (reinstall pr1-eval or `git checkout -- pr1_eval/data/{relpath}`), "
            "or put your own copy in a folder and pass --data-dir"
        )
    _verified[key] = actual
    return path


def write_manifest(root: Path | None = None) -> Path:
    """Rewrite ``MANIFEST.json`` from the files under ``root`` (after an intended data change)."""
    root = root or PACKAGED_DATA
    files = sorted(p for sub in ("benchmarks", "prompts") for p in (root / sub).glob("*") if p.is_file())
    listing = {p.relative_to(root).as_posix(): {"sha256": file_sha256(p), "bytes": p.stat().st_size} for p in files}
    doc = {
        "about": "sha256 and size of every packaged data file; pr1_eval.inputs.paths checks a file before reading it. "
        "After an intended change run: python -c 'from pr1_eval.inputs.paths import write_manifest; write_manifest()'",
        "files": listing,
    }
    target = root / MANIFEST_NAME
    target.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return target


def resolve_data_dir(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The benchmark folder the user named (``--data-dir``, else ``$PR1_DATA_DIR``), or None.

    None means "no folder given": tasks then come from the packaged copy (or the hub).
    """
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env).expanduser() if env else None


def resolve_prompts_dir(data_dir: Path | None = None) -> Path:
    """Folder to read named templates from: ``$PR1_PROMPTS_DIR``, else ``prompts/`` beside an
    explicit data folder when it exists, else the packaged templates."""
    env = os.environ.get(PROMPTS_DIR_ENV)
    if env:
        return Path(env).expanduser()
    data_dir = data_dir or resolve_data_dir()
    if data_dir is not None and (data_dir.parent / "prompts").is_dir():
        return data_dir.parent / "prompts"
    return packaged_prompts_dir()


def _beside_checkout() -> list[Path]:
    """``shared/data`` candidates: every parent of the current folder and of this package."""
    starts = [Path.cwd().resolve(), Path(__file__).resolve().parent]
    return [folder / "shared" / "data" for start in starts for folder in [start, *start.parents]]


def discover_shared_training() -> Path | None:
    """The nearest ``shared/data/training`` folder beside the checkout, or None."""
    for candidate in _beside_checkout():
        if (candidate / "training").is_dir():
            return candidate / "training"
    return None


def resolve_training_dir() -> Path | None:
    """Folder with the training sets (``parallel_gsm8k.jsonl`` …), or None when there is none."""
    env = os.environ.get(TRAINING_DIR_ENV)
    if env:
        return Path(env).expanduser()
    data_dir = resolve_data_dir()
    if data_dir is not None and (data_dir.parent / "training").is_dir():
        return data_dir.parent / "training"
    return discover_shared_training()
