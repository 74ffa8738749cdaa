"""What a nano job's figures are a function of, besides the commit: the start weights and the machine.

Why it is recorded: the tiny models are trained on each machine, and two CPUs (another vector width,
another BLAS build) round the same training differently, so a new machine starts the curriculum from
other weights — a new draw of every figure. Two jobs' figures can only be expected to agree bit for
bit when their start weights agree; ``nano.json`` names both, and :func:`same_start` is the check
``bench_nano --compare`` makes before comparing anything else.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
from pathlib import Path
from typing import Any

from repro.nano.checks import Check

WATCHED_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")
"""The CPU features that change which float kernels torch and MKL/OpenBLAS pick."""


def weights_digest(model_dir: str | os.PathLike[str]) -> str:
    """sha256 of a checkpoint's weight files (``*.safetensors``, in name order), hex."""
    digest = hashlib.sha256()
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        return "no safetensors files"
    for path in files:
        digest.update(path.name.encode())
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def _cpuinfo() -> tuple[str, list[str]]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or "unknown", []
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
    return (model.group(1).strip() if model else platform.processor() or "unknown",
            flags.group(1).split() if flags else [])


def machine_record() -> dict[str, Any]:
    """The CPU (model, the watched flags, a digest of all flags, cores), torch's version and build (BLAS,
    CPU capability it dispatches to), and numpy's BLAS."""
    import numpy
    import torch

    model, flags = _cpuinfo()
    build = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=([^,\s]+)", build)
    capability = re.search(r"CPU capability usage:\s*(\S+)", build)
    numpy_blas = "unknown"
    try:
        from threadpoolctl import threadpool_info

        numpy_blas = ", ".join(sorted({f"{i.get('internal_api')} {i.get('version')}" for i in threadpool_info()
                                       if i.get("user_api") == "blas"})) or "none loaded"
    except ImportError:
        pass
    return {
        "cpu": model, "cpu_flags": [f for f in WATCHED_FLAGS if f in flags],
        "cpu_flags_sha256": hashlib.sha256(" ".join(sorted(flags)).encode()).hexdigest()[:16],
        "cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
        "torch": torch.__version__, "torch_blas": blas.group(1) if blas else "unknown",
        "torch_cpu_capability": capability.group(1) if capability else "unknown",
        "numpy": numpy.__version__, "numpy_blas": numpy_blas,
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
    }


def same_start(first: dict[str, Any], second: dict[str, Any]) -> Check:
    """Whether two jobs (their ``nano.json``) started every shared stage from the same weights: the
    condition for comparing their figures at all."""
    a, b = first.get("start_weights") or {}, second.get("start_weights") or {}
    shared = [name for name in a if name in b]
    differ = [f"{name}: {a[name][:12]} vs {b[name][:12]}" for name in shared if a[name] != b[name]]
    machines = [doc.get("machine", {}) for doc in (first, second)]
    where = ("the same machine kind" if machines[0].get("cpu_flags_sha256") == machines[1].get("cpu_flags_sha256")
             else f"other CPUs ({machines[0].get('cpu')} {machines[0].get('cpu_flags')} vs "
                  f"{machines[1].get('cpu')} {machines[1].get('cpu_flags')})")
    if not shared:
        return Check("job", "same start weights", False, "no start weights recorded in one of the jobs (an older "
                     "nano.json?)", "both jobs record their start models' sha256")
    figures = (f"{len(shared)} start models equal; {where}" if not differ else
               f"start weights differ ({'; '.join(differ)}) on {where}: a new draw, so the figures below are "
               "not expected to agree")
    return Check("job", "same start weights", not differ, figures,
                 "every shared stage started from weights with the same sha256 (else the figures are a new draw)")
