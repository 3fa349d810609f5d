"""``python -m svgtpu`` is the ``svgtpu`` command."""

from svgtpu.cli import main

raise SystemExit(main())
