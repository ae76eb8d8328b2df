"""``python -m sandbox …``: see sandbox/apps/cli.py."""

import sys

from sandbox.apps.cli import main

sys.exit(main())
