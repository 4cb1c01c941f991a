"""``python -m mascot``: the ``mascot`` command."""

import sys

from mascot.cli.main import main

sys.exit(main())
