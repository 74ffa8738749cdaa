"""``python -m pr1_eval.grading._entry FD [--test-hooks]`` runs one grading worker.

A module of its own, never imported by the package, so ``-m`` does not re-execute a module
that the package import already loaded (see :mod:`pr1_eval.grading.worker`).

When the pool says stop, the worker leaves through ``os._exit`` once its output is flushed: it
keeps no state, and the interpreter's teardown of sympy and math-verify (about 0.1 s) is time its
pool's ``close`` waits out (at the end of every ``analyze``, after the last file is written).
"""

from __future__ import annotations

import os
import sys

from pr1_eval.grading.worker import main

if __name__ == "__main__":
    main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
