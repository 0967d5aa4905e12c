"""``python -m workbench``: the same entry point as the ``workbench`` command."""

from workbench.cli import main

raise SystemExit(main())
