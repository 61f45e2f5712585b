"""``python -m tokenmask``: the command line (also what ``torchrun`` / ``accelerate launch -m tokenmask`` start)."""

import sys

from tokenmask.cli.main import main

sys.exit(main())
