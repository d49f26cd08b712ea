"""Input features that would overflow float32 arithmetic are refused in one line (issue 58,
class 6): values finite as stored (float64 1e300, float32 1e38) became infinite once cast or
squared, every norm infinite and the ranking degenerate, with no word. Each reader of features
(precomputed arrays, a folder's ``.npy`` per picture, embedding columns) refuses them, naming the
file or the row; features within the bound read as before."""

import numpy as np
import pytest

from mispair.data.precomp import read_precomp, write_precomp
from mispair.data.readers.embeddings import _vector
from mispair.data.readers.table import image_features
from mispair.data.synthetic import make_synthetic
from mispair.errors import DataError
from mispair.sanity import FEATURE_ABS_BOUND, feature_problem


def test_the_bound_keeps_a_squared_norm_within_float32():
    largest = np.full((1, 4096), FEATURE_ABS_BOUND, dtype=np.float32)
    assert np.isfinite((largest.astype(np.float32) ** 2).sum())  # the bound itself: finite norms
    assert feature_problem(largest) is None
    assert "overflow" in feature_problem(np.array([1e300]))
    assert "NaN or infinite values" in feature_problem(np.array([np.nan]))


@pytest.mark.parametrize("value", [1e300, 1e20])
def test_precomputed_features_beyond_the_bound_are_refused_naming_the_image(tmp_path, value):
    pairs = make_synthetic(6, 2, seed=0)
    pairs.images = pairs.images.astype(np.float64)
    pairs.images[4, 0, 1] = value
    write_precomp(pairs, tmp_path, "train")
    with pytest.raises(DataError, match="image 4 has features beyond"):
        read_precomp(tmp_path, "train")
    pairs.images[4, 0, 1] = 1e6  # large, within the bound: read
    write_precomp(pairs, tmp_path, "train")
    assert read_precomp(tmp_path, "train").images.shape[0] == 6


def test_a_folder_s_npy_features_beyond_the_bound_are_refused(tmp_path):
    for k, value in enumerate((1.0, 3e38)):
        np.save(tmp_path / f"{k}.npy", np.full((2, 4), value, dtype=np.float32))
    with pytest.raises(DataError, match=r"1\.npy: features beyond"):
        image_features(tmp_path, ["0.npy", "1.npy"], tmp_path / "cache", None)  # type: ignore[arg-type]


def test_an_embedding_column_beyond_the_bound_is_refused_naming_the_row():
    with pytest.raises(DataError, match="pair 7: features beyond"):
        _vector("[1e38, 1.0]", None, "t.csv: pair 7")  # type: ignore[arg-type]
    assert _vector("[1e3, 1.0]", None, "t.csv: pair 7").tolist() == [1000.0, 1.0]  # type: ignore[arg-type]
