"""Reading a process's state from ``/proc``, for the tests that kill a parent and count what is left."""

from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    """Running, or stopped, but not gone and not a zombie nobody reaped yet."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")
