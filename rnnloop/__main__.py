"""`python -m rnnloop`: the rnnloop command (see rnnloop.cli)."""

import sys

from .cli import main

sys.exit(main())
