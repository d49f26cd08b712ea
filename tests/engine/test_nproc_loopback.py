"""``--nproc``: the processes meet on this machine only, and any process count audits a small
collection (issue 58, class 3).

torch's TCP store (what torchrun's rendezvous uses) listens on every interface whatever host it is
given, so anyone on the network could connect to it during a run; mispair's launcher meets its
processes at a private file instead and keeps Gloo on the loopback interface. The test watches
every socket the launched processes hold while an audit runs (``/proc/net/tcp`` and ``tcp6``,
matched to the processes by their file descriptors) and requires that each listening one is bound
to a loopback address. A 24-picture folder (one dev picture: fewer images than processes) used to
end in a rank's traceback (``max() arg is an empty sequence``); it is audited as one process
audits it."""

import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import hostile_fixtures as fx  # noqa: E402

AUDIT = [
    "model.text_encoder=bigru",
    "model.image_pooling=fragments",
    "model.embed_dim=16",
    "model.word_dim=8",
    "train.epochs=1",
    "division.folds=3",
    "division.epochs=1",
    "division.rounds=1",
    "division.repeats=1",
]
LISTEN = "0A"  # the state column of /proc/net/tcp


def pictures(folder: Path, n: int = 24) -> Path:
    """A folder of ``n`` distinct plain pictures with ``captions.csv`` (no split column)."""
    folder.mkdir(parents=True)
    rows = fx.colour_pictures(n)
    for name, blob, _ in rows:
        (folder / name).write_bytes(blob)
    with (folder / "captions.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([("image", "caption"), *((name, text) for name, _, text in rows)])
    return folder


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        found.add(current)
        todo += children.get(current, [])
    return found


def socket_inodes(pids: set[int]) -> set[str]:
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


def loopback(address: str) -> bool:
    """127.0.0.0/8 (IPv4, little-endian hex), ::1, or ::ffff:127.x.x.x."""
    if len(address) == 8:
        return address.endswith("7F")
    return address == "00000000000000000000000001000000" or (
        address.startswith("0000000000000000FFFF0000") and address.endswith("7F")
    )


def test_loopback_addresses_read_as_proc_writes_them():
    assert loopback("0100007F") and loopback("00000000000000000000000001000000")
    assert not loopback("00000000") and not loopback("00000000000000000000000000000000")
    assert not loopback("0A00000A")  # 10.0.0.10


@pytest.mark.slow  # two audits of 24 pictures, about 40 s on two cores
def test_nproc_2_listens_on_loopback_only_and_audits_a_small_folder_as_one_process(tmp_path):
    folder = pictures(tmp_path / "p24")
    base = [sys.executable, "-m", "mispair", "audit", str(folder), *AUDIT, "--quiet"]
    alone = subprocess.run([*base, "--out", str(tmp_path / "one")], capture_output=True, text=True)
    assert alone.returncode == 0, alone.stderr
    seen: set[str] = set()
    with subprocess.Popen(
        [*base, "--out", str(tmp_path / "two"), "--nproc", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as run:
        while run.poll() is None:
            seen |= listening(socket_inodes(descendants(run.pid)))
            time.sleep(0.05)
        err = run.stderr.read()
    assert run.returncode == 0, err
    assert seen, "no listening socket seen: the check saw nothing of the processes' connections"
    assert all(loopback(a) for a in seen), f"listening beyond loopback: {sorted(seen)}"
    one, two = (_pairs(tmp_path / f) for f in ("one", "two"))
    assert list(one.index) == list(two.index) and len(two) == 24
    assert (one["held_out_score"] - two["held_out_score"]).abs().max() <= 1e-5


def _pairs(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / "pairs.csv").set_index("pair_id").sort_index()
