"""A model folder's fingerprint: which weights and tokenizer a run's samples came from.

Why: ``run.json`` named the model only by its path, so a run stopped, its folder overwritten with
other weights (a re-merged checkpoint, a new ``hf/`` folder) and the command rerun, finished with
samples of two models in one run, marked complete. The fingerprint is recorded when a run starts
(``model.fingerprint``) and a resume with another one is refused
(:func:`pr1_eval.generate.resume.check_resumable`).

What is hashed, and why: for each weight file (``*.safetensors``, ``*.bin``), tokenizer file and
``config.json``, its size and the sha256 of its first and last MiB. Not the safetensors index:
the index maps tensor names to files and is byte-identical for every checkpoint of one
architecture, so a retrained checkpoint has the same index. Not the whole files: hashing 8-60 GB
would add minutes to every start and resume. The first MiB of a safetensors file holds its header
(every tensor's name, dtype, shape and offset) and the first tensors' bytes; the last MiB holds
the last tensor's bytes (``lm_head`` or a final norm), which every training step changes, so two
checkpoints of one job differ there; a re-saved file of other length differs in size. What this
misses is a change confined to the middle of a file with the same size, which no realistic
re-merge or copy produces. Cost: 2 MiB read per file, milliseconds for a model of any size.

Hub ids are identified by their revision, not fingerprinted (their files are not in a folder the
run owns); a folder without any such file gets no fingerprint.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pr1_eval.inputs.model_files import TOKENIZER_FILES, WEIGHT_PATTERNS

#: Bytes hashed at each end of a file.
EDGE_BYTES = 1 << 20
#: Name of the method, recorded with the fingerprint so a future method is never compared with this one.
SCHEME = "size+sha256(first and last MiB) per file, v1"
#: Files that also decide what the samples are, beside the weights and the tokenizer files.
_OTHER_FILES = ("config.json", "merges.txt", "special_tokens_map.json", "added_tokens.json")


def fingerprint_files(folder: Path) -> list[Path]:
    """The files a fingerprint covers, sorted by name (the safetensors index is excluded: see above)."""
    names: set[Path] = set()
    for pattern in WEIGHT_PATTERNS:
        names.update(p for p in folder.glob(pattern) if p.is_file() and not p.name.endswith(".index.json"))
    for name in (*TOKENIZER_FILES, *_OTHER_FILES):
        if (folder / name).is_file():
            names.add(folder / name)
    return sorted(names, key=lambda p: p.name)


def _file_digest(path: Path) -> str:
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as handle:
        digest.update(handle.read(EDGE_BYTES))
        if size > EDGE_BYTES:
            handle.seek(max(EDGE_BYTES, size - EDGE_BYTES))
            digest.update(handle.read(EDGE_BYTES))
    return digest.hexdigest()


def model_fingerprint(model: str | Path) -> dict[str, Any] | None:
    """``{"scheme", "sha256", "files": {name: "size:sha256"}}`` of a local model folder, or None
    (a hub id, a missing folder, a folder holding none of the covered files)."""
    folder = Path(model).expanduser()
    if not folder.is_dir():
        return None
    files = {p.name: f"{p.stat().st_size}:{_file_digest(p)}" for p in fingerprint_files(folder)}
    if not files:
        return None
    overall = hashlib.sha256("\n".join(f"{name} {value}" for name, value in files.items()).encode()).hexdigest()
    return {"scheme": SCHEME, "sha256": overall, "files": files}


def fingerprint_difference(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """None when two fingerprints agree; else a short account: both digests and the files that differ."""
    if old.get("scheme") != new.get("scheme"):
        return None  # another method: not comparable, so not a reason to refuse
    if old.get("sha256") == new.get("sha256"):
        return None
    before, after = old.get("files") or {}, new.get("files") or {}
    changed = sorted(name for name in set(before) | set(after) if before.get(name) != after.get(name))
    shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
    return (f"fingerprint {str(old.get('sha256'))[:16]} when the run started, {str(new.get('sha256'))[:16]} now; "
            f"files that differ: {shown or 'none listed'}")
