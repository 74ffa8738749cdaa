"""``python -m pr1_eval.grading._entry FD [--test-hooks]`` runs one grading worker.

A module of its own, never imported by the package, so ``-m`` does not re-execute a module
that the package import already loaded (see :mod:`pr1_eval.grading.worker`).
"""

from __future__ import annotations

import sys

from pr1_eval.grading.worker import main

if __name__ == "__main__":
    main(sys.argv[1:])
