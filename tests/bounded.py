"""Run a snippet in a fresh Python process and measure it: what the bounded-reader tests use to
show that a bomb is refused within a time and memory budget (peak resident memory of that
process alone, from ``wait4`` in a small launcher)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass

LAUNCHER = """import os, sys
pid = os.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@dataclass
class Measured:
    code: int
    stderr: str
    seconds: float
    peak_mb: float


def measured(code: str, *, timeout: float = 60, env: dict[str, str] | None = None) -> Measured:
    """Run the Python ``code`` in a new process (its group killed after ``timeout`` seconds)."""
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-S", "-c", LAUNCHER, sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        out, err = process.communicate()
    peak = out.decode().strip()
    return Measured(
        process.returncode,
        err.decode("utf-8", "replace"),
        time.perf_counter() - start,
        int(peak) / 1024 if peak.isdigit() else float("inf"),
    )


def call(module: str, function: str, *args: object) -> str:
    """Code that calls ``module.function(*args)`` (arguments by their ``repr``) and exits 2 with
    the message on stderr when it raises a mispair error (what the command line would print)."""
    arguments = ", ".join(map(repr, args))
    return (
        "import sys\n"
        "from mispair.errors import MispairError\n"
        f"from {module} import {function}\n"
        "try:\n"
        f"    {function}({arguments})\n"
        "except MispairError as error:\n"
        "    print(error, file=sys.stderr)\n"
        "    sys.exit(2)\n"
    )
