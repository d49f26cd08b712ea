"""``python -m mispair``: the command line (what ``torchrun -m mispair`` runs in each process)."""

import sys

from mispair.cli import main

sys.exit(main())
