"""``python -m memplan.cli``: the ``memplan`` command."""

import sys

from memplan.cli import main

sys.exit(main())
