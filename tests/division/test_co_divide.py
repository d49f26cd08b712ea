"""NCR's co-divide: each network trains on the other's division."""

import numpy as np
import pytest

from mispair.division import co_divide, fit_gmm

from .conftest import two_modes


def test_swaps_divisions_of_two_networks():
    a, b = fit_gmm(two_modes(100, seed=0)), fit_gmm(two_modes(100, seed=1))
    for_a, for_b = co_divide([a, b])
    assert for_a is b and for_b is a


def test_works_on_clean_probability_arrays():
    rows = np.array([[0.9, 0.1], [0.2, 0.8]])
    swapped = co_divide(list(rows))
    np.testing.assert_array_equal(np.stack(swapped), rows[::-1])


@pytest.mark.parametrize("n", [1, 3])
def test_needs_exactly_two(n):
    with pytest.raises(ValueError, match="two networks"):
        co_divide([np.zeros(2)] * n)
