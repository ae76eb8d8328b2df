"""``python -m autopilot_cli``."""

from autopilot_cli.main import main

raise SystemExit(main())
