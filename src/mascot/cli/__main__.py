import sys

from mascot.cli.main import main

sys.exit(main())
