"""``python -m repro.cli …`` is ``pr1-repro …`` (the nano curriculum and the GPU check run stages this way)."""

from repro.cli.main import main

raise SystemExit(main())
