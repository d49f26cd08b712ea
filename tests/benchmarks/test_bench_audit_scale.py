"""benchmarks/bench_audit_scale.py without an audit: its collection is one the precomp reader reads
(5 captions per image, the swapped captions marked in the noise record), and the growth exponent
is the power of a power law; the memory sampler sees a child's anonymous memory and the pages of
its mapped files apart."""

import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mispair.data.precomp import read_natural_noise, read_precomp

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("bench_audit_scale")


def test_the_collection_is_precomputed_pairs_with_its_swaps_recorded(bench, tmp_path):
    args, _ = bench.parse_args(["--regions", "3", "--dim", "8", "--clusters", "4", "--noise", "0.3"])
    bench.write_collection(tmp_path, 400, args)
    splits = {s: read_precomp(tmp_path, s) for s in ("train", "dev", "test")}
    assert sum(p.n_captions for p in splits.values()) == 400
    assert all(p.captions_per_image == 5 and p.images.shape[1:] == (3, 8) for p in splits.values())
    noisy = read_natural_noise(tmp_path, "train")
    train = splits["train"]
    assert len(noisy) == train.n_captions and 0.2 < noisy.mean() <= 0.3
    per = bench.WORDS_PER_CLUSTER
    clusters = [{int(w[1:]) // per for w in c.split() if w[1:].isdigit()} for c in train.captions]
    assert all(len(c) == 1 for c in clusters)  # a caption's words come from one cluster
    for image in range(train.n_images):  # the clean captions of an image share its cluster
        own = [k for k in np.flatnonzero(train.image_of_caption == image) if not noisy[k]]
        assert len({next(iter(clusters[k])) for k in own}) <= 1


def test_the_growth_exponent_is_the_power_of_a_power_law(bench):
    sizes = [5_000, 10_000, 40_000]
    assert bench.growth(sizes, [3e-4 * n**1.5 for n in sizes]) == pytest.approx(1.5)
    assert bench.growth([5_000], [1.0]) is None


def _sampled(bench, code: str):
    child = subprocess.Popen([sys.executable, "-c", code])
    sampler = bench.MemorySampler(child.pid)
    sampler.start()
    child.wait()
    sampler.join()
    return sampler


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_anonymous_peak_sees_memory_a_child_held_for_a_moment(bench):
    code = 'import time; block = b"x" * (300 << 20); time.sleep(1.5); del block; time.sleep(0.5)'
    sampler = _sampled(bench, code)
    assert 300 <= sampler.peak_mb < 400  # the 300 MiB block, plus the interpreter
    largest = sampler.largest
    assert 300 <= largest.anon <= largest.rss and largest.anon < 400 and 0 < largest.seconds < 2.5


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_high_water_mark_dates_a_peak_too_short_for_any_reading(bench):
    code = (
        "import time\n"
        "time.sleep(1.0)\n"
        "for _ in range(3):\n"
        "    block = bytearray(300 << 20); block[::4096] = b'x' * len(block[::4096]); del block\n"
        "time.sleep(1.0)\n"
    )
    seconds, mib = _sampled(bench, code).high_water
    assert mib >= 300 and 0.8 < seconds < 2.0  # reached after the first second, never later


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_largest_rss_sample_tells_pages_of_a_mapped_file_from_anonymous_memory(bench, tmp_path):
    path = tmp_path / "features.bin"
    path.write_bytes(b"\1" * (200 << 20))
    code = (
        "import mmap, time\n"
        f"handle = open({str(path)!r}, 'rb')\n"
        "pages = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)\n"
        "total = sum(pages[k] for k in range(0, len(pages), 4096))\n"
        "time.sleep(1.5)\n"
    )
    largest = _sampled(bench, code).largest
    assert largest.file >= 200 and largest.anon < 100  # the file's pages count in RSS, not as anonymous
    assert largest.rss >= largest.file
