"""Which addresses a process tree listens on, read from ``/proc`` (Linux): what the ``--nproc``
checks of the hostile cases (:mod:`hostile_apply`) and of ``tests/engine/test_nproc_loopback.py``
watch while a command runs."""

from __future__ import annotations

import os
from pathlib import Path

LISTEN = "0A"  # the state column of /proc/net/tcp


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        found.add(current := todo.pop())
        todo += children.get(current, [])
    return found


def socket_inodes(pids: set[int]) -> set[str]:
    """The inodes of the sockets the processes ``pids`` hold open."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    return inodes


def listening(inodes: set[str]) -> set[str]:
    """The local addresses (hex, as /proc writes them) of the listening sockets among ``inodes``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == LISTEN and fields[9] in inodes:
                found.add(fields[1].split(":")[0])
    return found


def listening_tree(pid: int) -> set[str]:
    """The addresses ``pid`` and the processes below it listen on now."""
    return listening(socket_inodes(descendants(pid)))


def loopback(address: str) -> bool:
    """127.0.0.0/8 (IPv4, little-endian hex), ::1, or ::ffff:127.x.x.x."""
    if len(address) == 8:
        return address.endswith("7F")
    return address == "0" * 24 + "01000000" or (
        address.startswith("0" * 16 + "FFFF0000") and address.endswith("7F")
    )
