"""Reading a memory-mapped feature file a block at a time: the blocks are the array's rows, the
pass keeps one block resident instead of the whole file, and a writable or copy-on-write map
keeps its changes; stacking a mapped array with others gives ``np.concatenate``'s rows, mapped
(a temporary file) without holding them in memory."""

import sys

import numpy as np
import pytest

from mispair.data.mapped import BLOCK_BYTES, FAULT_BYTES, row_blocks, rows, stacked

MIB = 1 << 20


def resident_mib() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / MIB


@pytest.fixture
def feature_file(tmp_path):
    path = tmp_path / "train_ims.npy"
    features = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(512, 32, 1024))
    for start in range(0, 512, 64):
        features[start : start + 64] = np.arange(start, start + 64, dtype=np.float32)[:, None, None]
    features.flush()
    del features
    return path


def test_blocks_and_picked_rows_are_the_arrays_rows(feature_file):
    mapped = np.load(feature_file, mmap_mode="r")
    block = rows(mapped, slice(100, 140), np.float64)
    assert block.dtype == np.float64 and not isinstance(block, np.memmap)
    np.testing.assert_array_equal(block, np.asarray(mapped[100:140], dtype=np.float64))
    picked = np.array([5, 3, 400, 3])
    np.testing.assert_array_equal(rows(mapped, picked), mapped[picked])
    in_memory = np.arange(12.0).reshape(3, 2, 2)
    np.testing.assert_array_equal(rows(in_memory, slice(1, 3)), in_memory[1:3])


@pytest.mark.parametrize("size", [None, 7, 512, 1000])
def test_blocks_cover_the_rows_in_order(feature_file, size):
    mapped = np.load(feature_file, mmap_mode="r")
    seen = [(block, part[:, 0, 0].copy()) for block, part in row_blocks(mapped, size, np.float64)]
    assert [b.start for b, _ in seen] == list(range(0, 512, size or 512))  # 64 MiB: one block
    np.testing.assert_array_equal(np.concatenate([p for _, p in seen]), np.arange(512.0))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_a_pass_over_a_mapped_file_keeps_one_block_resident(feature_file):
    mapped = np.load(feature_file, mmap_mode="r")  # 64 MiB
    before = resident_mib()
    total = sum(float(rows(mapped, slice(s, s + 32))[:, 0, 0].sum()) for s in range(0, 512, 32))
    total += sum(float(part[:, 0, 0].sum()) for _, part in row_blocks(mapped, 32))
    assert total == 2 * sum(range(512))
    assert resident_mib() - before < 16  # a block is 4 MiB; without the release it grows by 64
    for start in range(0, 512, 32):
        np.asarray(mapped[start : start + 32]).sum()
    assert resident_mib() - before > 48  # the same pass by slicing: the whole file stays resident


@pytest.mark.parametrize(
    "chosen",
    [slice(None), slice(500, 10, -3), np.arange(0, 512, 2), np.arange(512) % 3 == 1, np.arange(511, -1, -1)],
    ids=["all", "slice-backwards", "even", "mask", "reversed"],
)
def test_rows_picked_a_block_at_a_time_are_numpys_rows(feature_file, chosen):
    mapped = np.load(feature_file, mmap_mode="r")
    picked = rows(mapped, chosen, np.float64, block_bytes=5 * 32 * 1024 * 4)  # 5 rows a block
    assert picked.dtype == np.float64
    np.testing.assert_array_equal(picked, np.asarray(mapped[chosen], dtype=np.float64))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_picking_most_of_a_mapped_file_keeps_one_block_of_it_resident(feature_file, monkeypatch):
    import mispair.data.mapped as mapped_module

    mapped = np.load(feature_file, mmap_mode="r")  # 64 MiB
    peaks = []
    release = mapped_module.release

    def measured(array):  # the resident memory just before each release: the copy so far + a block
        peaks.append(resident_mib())
        release(array)

    monkeypatch.setattr(mapped_module, "release", measured)
    before = resident_mib()
    picked = rows(mapped, np.arange(0, 512, 2), block_bytes=4 * MIB)  # 32 MiB of the file's 64
    assert picked[:, 0, 0].tolist() == list(range(0, 512, 2))
    assert len(peaks) == 256 // (4 * MIB // FAULT_BYTES)  # a picked row counts as FAULT_BYTES
    assert max(peaks) - before < 32 + 16  # the copy (32 MiB) and about one block of the map


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_scattered_rows_are_picked_in_blocks_sized_by_what_touching_them_maps(tmp_path, monkeypatch):
    import mispair.data.mapped as mapped_module

    path = tmp_path / "small_rows.npy"  # 32,768 rows of 4 KiB: 128 MiB, in the page cache once written
    written = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(32768, 1024))
    written[:] = np.arange(32768, dtype=np.float32)[:, None]
    written.flush()
    del written
    mapped = np.load(path, mmap_mode="r")
    scattered = np.arange(0, 32768, 64)  # 512 rows, one every 256 KiB: a 2 MiB copy
    peaks, release = [], mapped_module.release

    def measured(array):
        peaks.append(resident_mib())
        release(array)

    monkeypatch.setattr(mapped_module, "release", measured)
    before = resident_mib()
    picked = rows(mapped, scattered)
    assert picked[:, 0].tolist() == scattered.tolist()
    assert len(peaks) == 512 // (BLOCK_BYTES // FAULT_BYTES)
    assert max(peaks) - before < 32  # a block's touches map at most 32 × 2 MiB, in practice far less
    release(mapped)
    before = resident_mib()
    mapped[scattered].sum()  # the same rows in one fancy index
    assert resident_mib() - before > 64  # the pages around every touched row: most of the file


@pytest.mark.parametrize("mode", ["r+", "c"])
def test_a_writable_map_keeps_its_changes(feature_file, mode):
    mapped = np.load(feature_file, mmap_mode=mode)
    mapped[7] = -1.0
    assert (rows(mapped, slice(0, 8))[7] == -1.0).all()
    assert (mapped[7] == -1.0).all()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_stacking_a_mapped_array_gives_concatenates_rows_mapped_and_never_held_in_memory(feature_file):
    mapped = np.load(feature_file, mmap_mode="r")  # 64 MiB
    small = np.full((3, 32, 1024), -2.0, dtype=np.float16)
    before = resident_mib()
    joined = stacked([small, mapped, small[:1]])
    assert resident_mib() - before < 16  # written a block at a time; np.concatenate: +64 MiB
    assert isinstance(joined, np.memmap) and joined.dtype == np.float32 and not joined.flags.writeable
    want = np.concatenate([small.astype(np.float32), np.asarray(mapped), small[:1].astype(np.float32)])
    np.testing.assert_array_equal(rows(joined, slice(0, 516)), want)
    in_memory = stacked([small, small])
    assert not isinstance(in_memory, np.memmap)
    np.testing.assert_array_equal(in_memory, np.concatenate([small, small]))
    assert stacked([mapped[:0], small[:0]]).shape == (0, 32, 1024)
