"""``python -m mispair``: the command line (what ``torchrun -m mispair`` runs in each process).

A process of a torchrun launch (``WORLD_SIZE`` > 1) ends with ``os._exit`` once its command has
returned and its output is flushed: its process group is destroyed by then, but torch's C++
teardown at interpreter exit can still abort it (``terminate called without an active
exception``, SIGABRT; seen on the CI machine for a rank that had finished its work), and torchrun
would then fail the whole launch after a successful audit."""

import os
import sys

from mispair.cli import main

code = main()
if int(os.environ.get("WORLD_SIZE", "1")) > 1:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
