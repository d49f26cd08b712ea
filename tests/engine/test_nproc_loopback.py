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
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import hostile_fixtures as fx  # noqa: E402
from listening import listening_tree, loopback  # noqa: E402

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


def pictures(folder: Path, n: int = 24) -> Path:
    """A folder of ``n`` distinct plain pictures with ``captions.csv`` (no split column)."""
    folder.mkdir(parents=True)
    rows = fx.colour_pictures(n)
    for name, blob, _ in rows:
        (folder / name).write_bytes(blob)
    with (folder / "captions.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([("image", "caption"), *((name, text) for name, _, text in rows)])
    return folder


def test_loopback_addresses_read_as_proc_writes_them():  # the watcher of the tests and the hostile cases
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
            seen |= listening_tree(run.pid)
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
