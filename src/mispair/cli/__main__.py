"""``python -m mispair.cli``: the command line (as ``python -m mispair``, which torchrun runs)."""

import sys

from mispair.cli import main

sys.exit(main())
