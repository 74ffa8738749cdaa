"""Cache files that heal: a damaged entry is detected by checksum, dropped with a warning and
computed again, never served and never a reason for a later command to fail.

Why here, not in the run store: only the analysis' caches (:mod:`analysis.embed_cache`,
:mod:`analysis.result_cache`, :mod:`analysis.block_cache`, :mod:`analysis.output_cache`) use it,
and :mod:`analysis.output_cache` is imported before anything heavy, so this needs the standard
library only. A cache file names the sha256 of its own bytes (``shard-<sha256>.json``), so the
check needs no second file that could be lost or disagree.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from contextlib import suppress
from pathlib import Path


def verified_bytes(path: Path) -> bytes:
    """The bytes of a cache file named ``<prefix>-<sha256 of its bytes>.<ext>``, checked against
    its name (ValueError when they differ). A name without a 64-digit digest is read unchecked."""
    data = path.read_bytes()
    digest = path.stem.rpartition("-")[2]
    checked = len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)
    if checked and hashlib.sha256(data).hexdigest() != digest:
        raise ValueError(f"checksum mismatch ({len(data)} bytes, not the ones it was written with)")
    return data


def drop_damaged(path: Path, exc: BaseException, then: str) -> None:
    """A cache entry is damaged: say so (a warning on stderr, never an error) and remove it, so the
    value is computed again and the cache heals instead of failing every later command."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    print(f"warning: cache entry {path} is damaged ({reason}); dropped, {then}", file=sys.stderr)
    with suppress(OSError):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
