"""Noise injection: the invariants of both protocols, determinism, records, reference files."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mispair import NoiseRecord, inject_noise
from mispair.errors import DataError


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 60), st.sampled_from([1, 5]), st.floats(0, 1), st.integers(0, 999))
def test_ncr_moves_chosen_captions_among_themselves(n_images, per_image, rate, seed):
    record = inject_noise(n_images, per_image, rate, "ncr", seed)
    n = n_images * per_image
    moved = record.image_of_caption != record.true_image
    assert moved.sum() <= round(rate * n)
    # the paired images are a permutation of the true ones: captions were shuffled among themselves
    assert sorted(record.image_of_caption) == sorted(record.true_image)
    assert np.array_equal(record.is_noisy, moved)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 60), st.sampled_from([1, 5]), st.floats(0, 1), st.integers(0, 999))
def test_pmp_moves_whole_images(n_images, per_image, rate, seed):
    record = inject_noise(n_images, per_image, rate, "pmp", seed)
    groups = record.image_of_caption.reshape(n_images, per_image)
    assert (groups == groups[:, :1]).all()  # all captions of an image move together
    new_image = groups[:, 0]
    assert sorted(new_image) == list(range(n_images))  # images permuted among themselves
    assert (new_image != np.arange(n_images)).sum() <= round(rate * n_images)
    assert np.array_equal(record.is_noisy, record.image_of_caption != record.true_image)


def test_fraction_determinism_and_extremes():
    a, b = inject_noise(1000, 5, 0.4, "pmp", 3), inject_noise(1000, 5, 0.4, "pmp", 3)
    assert np.array_equal(a.image_of_caption, b.image_of_caption)
    assert not np.array_equal(a.image_of_caption, inject_noise(1000, 5, 0.4, "pmp", 4).image_of_caption)
    assert 0.38 < a.noise_rate <= 0.4
    assert 0.38 < inject_noise(1000, 5, 0.4, "ncr", 0).noise_rate <= 0.4
    assert inject_noise(50, 5, 0.0, "ncr", 0).noise_rate == 0
    assert inject_noise(500, 1, 1.0, "pmp", 0).noise_rate > 0.99


def test_identical_captions_are_not_noise():
    groups = np.array([0, 0, 1, 1, 2, 2])  # images 0, 1, 2 each with one caption text
    record = inject_noise(6, 1, 1.0, "pmp", 0, caption_groups=groups)
    expected = groups[record.image_of_caption] != groups
    assert np.array_equal(record.is_noisy, expected)


def test_save_load_and_reference_files(tmp_path):
    record = inject_noise(20, 5, 0.5, "ncr", 1)
    record.save(tmp_path / "noise.npy")
    loaded = NoiseRecord.load(tmp_path / "noise.npy")
    assert np.array_equal(loaded.image_of_caption, record.image_of_caption)
    assert np.array_equal(loaded.is_noisy, record.is_noisy)
    np.save(tmp_path / "per_caption.npy", record.image_of_caption)
    ref = NoiseRecord.from_reference(tmp_path / "per_caption.npy", 20, 5)
    assert np.array_equal(ref.is_noisy, record.is_noisy)
    perm = np.random.default_rng(0).permutation(20)
    np.save(tmp_path / "per_image.npy", perm)
    ref = NoiseRecord.from_reference(tmp_path / "per_image.npy", 20, 5)
    assert np.array_equal(ref.image_of_caption, np.repeat(perm, 5))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda p: inject_noise(10, 5, 1.5), "rate"),
        (lambda p: inject_noise(10, 5, 0.2, "shuffle"), "protocol"),
        (lambda p: (np.save(p, np.arange(7)), NoiseRecord.from_reference(p, 10, 5)), "fit neither"),
        (lambda p: (np.save(p, np.zeros(50)), NoiseRecord.from_reference(p, 10, 5)), "integer"),
        (lambda p: NoiseRecord.load(p.with_name("missing.npy")), "not found"),
    ],
)
def test_bad_input_is_a_one_line_data_error(tmp_path, call, message):
    with pytest.raises(DataError, match=message) as info:
        call(tmp_path / "bad.npy")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "override", ["data.noise.rate=-0.1", "data.noise.rate=1.5", "data.noise.protocol=random"]
)
def test_noise_settings_are_checked(override):
    from mispair.config import load_config
    from mispair.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"^{override.split('=')[0]}: "):
        load_config(None, [override])


@pytest.mark.parametrize("column, value", [(0, -1), (0, 10), (1, 10), (1, -3)])
def test_a_noise_file_with_an_image_outside_the_split_is_refused(tmp_path, column, value):
    from mispair.config import DataConfig
    from mispair.data.noise import noise_of_split
    from mispair.data.synthetic import make_synthetic

    train = make_synthetic(10, 2, seed=0)
    record = inject_noise(10, 2, 0.5, "pmp", seed=0)
    table = np.stack([record.image_of_caption, record.true_image, record.is_noisy.astype(np.int64)])
    table[column, 3] = value
    np.save(tmp_path / "noise.npy", table)
    data = DataConfig(source="synthetic")
    data.noise.file = str(tmp_path / "noise.npy")
    with pytest.raises(DataError, match=r"image indices outside \[0, 10\)"):
        noise_of_split(data, train)


@pytest.mark.parametrize("protocol", ["pmp", "ncr"])
def test_noise_injection_takes_any_number_of_captions_per_image(protocol):
    owner = np.repeat(np.arange(200), np.random.default_rng(0).integers(1, 4, size=200))
    record = inject_noise(0, 0, 0.4, protocol, seed=1, image_of_caption=owner)
    assert np.array_equal(record.true_image, owner)
    assert np.array_equal(record.is_noisy, record.image_of_caption != owner)
    share = (
        record.is_noisy.mean()
        if protocol == "ncr"
        else np.mean([record.is_noisy[owner == i].all() for i in range(200)])
    )
    assert share == pytest.approx(0.4, abs=0.06)
    if protocol == "pmp":  # the captions of an image move together, onto one image
        for i in range(200):
            assert len(set(record.image_of_caption[owner == i].tolist())) == 1
