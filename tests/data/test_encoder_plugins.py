"""Encoders as registry entries: an image encoder plugged in by one registration, a Hugging Face
text model from a local folder, and the open_clip and timm entries with tiny random models saved
locally; each audits a collection end to end, and weights that do not fit are a one-line error."""

import importlib
import json
import os

import numpy as np
import pytest
import torch
from torch import nn

from mispair.audit import audit_collection
from mispair.config import DataConfig
from mispair.data.cache_files import read_arrays
from mispair.data.caption_encoders import caption_vectors
from mispair.data.image_encoders import create_image_encoder, register_image_encoder
from mispair.data.loading import load_split, resolve_source
from mispair.errors import ConfigError
from tests.data.readers_forms import rows, write_form
from tests.tiny import TINY_AUDIT_SCHEDULE

TINY = TINY_AUDIT_SCHEDULE


def optional(module: str):
    """``module``, or a skip when it is absent or cannot be imported (a torchvision built for
    another torch breaks timm and open_clip with a RuntimeError, not an ImportError). CI runs
    these tests again in an environment with the ``clip`` and ``timm`` extras
    (``scripts/plugins_env.sh``) and sets ``MISPAIR_REQUIRE_PLUGINS=1``: there a missing module
    fails the test instead of skipping it."""
    try:
        return importlib.import_module(module)
    except Exception as exc:
        if os.environ.get("MISPAIR_REQUIRE_PLUGINS") == "1":
            raise
        pytest.skip(f"{module} cannot be imported: {type(exc).__name__}")


class TinyGrid(nn.Module):
    """``[B, 3, 32, 32] -> [B, 6, 4, 4]``: one strided convolution (an encoder in one file)."""

    image_size = 32
    cache_name = "tiny-grid-test"

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 6, kernel_size=8, stride=8)

    def forward(self, pixels):
        return self.conv(pixels)


register_image_encoder("tiny_grid_test")(lambda options: TinyGrid())


def tiny_bert(folder):
    """A random one-layer BERT with a word-level vocabulary of the test captions, saved as a
    Hugging Face model folder."""
    transformers = pytest.importorskip("transformers")
    words = sorted({w.strip(",") for r in rows() for w in r["caption"].split()})
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]))
    transformers.BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    config = transformers.BertConfig(
        vocab_size=5 + len(words),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
    )
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(folder)
    return folder


def test_a_registered_image_encoder_gives_the_features(tmp_path):
    folder = write_form("folder-csv", tmp_path / "c")
    data = resolve_source(DataConfig(root=str(folder), image_encoder="tiny_grid_test"))
    train = load_split(data, "train")
    assert train.images.shape[1:] == (16, 6)
    from mispair.data.pictures.images import load_picture

    name = train.image_ids[0]
    pixels = (
        torch.from_numpy(np.array(load_picture(folder / name, 32))).permute(2, 0, 1)[None].float() - 127
    ) / 128
    with torch.no_grad():
        expected = TinyGrid()(pixels).flatten(2).transpose(1, 2)[0].numpy()
    np.testing.assert_allclose(train.images[0].astype(np.float32), expected, atol=2e-2)


def test_a_local_hugging_face_model_gives_each_caption_its_mean_pooled_vector(tmp_path):
    transformers = pytest.importorskip("transformers")
    folder = tiny_bert(tmp_path / "bert")
    captions = ["a red square number 0", "a blue disc number 2"]
    got = caption_vectors("huggingface", {"path": str(folder)}, captions, tmp_path / "cache")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    for caption, vector in zip(captions, got):
        ids = tokenizer(caption, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            expected = model(input_ids=ids).last_hidden_state[0].mean(dim=0).numpy()
        np.testing.assert_allclose(vector, expected, atol=1e-5)
    cached = list((tmp_path / "cache" / "captions").glob("*.vectors"))
    assert len(cached) == 1
    np.testing.assert_array_equal(read_arrays(cached[0])["vectors"], got)  # a checked cache entry


def test_a_collection_audits_through_plugged_encoders(tmp_path):
    folder = write_form("folder-csv", tmp_path / "c")
    bert = tiny_bert(tmp_path / "bert")
    options = [
        "data.image_encoder=tiny_grid_test",
        "data.caption_encoder=huggingface",
        f"data.caption_encoder_options={{path: {bert}}}",
    ]
    result = audit_collection(
        folder, tmp_path / "audit", overrides=[*TINY, *options], progress=False, log=lambda _: None
    )
    assert len(result.pairs) == result.summary["pairs_scored"] == len(rows())
    config = json.loads((tmp_path / "audit" / "run" / "config.json").read_text())
    assert config["model"]["text_encoder"] == "precomputed"
    assert "raw_similarity" not in result.pairs  # a CNN grid and a BERT are no matched pair
    # a picture query goes through the run's own image encoder (a 6-channel grid, not EfficientNet)
    from mispair.engine.trained import TrainedRun
    from mispair.search import Index

    best = tmp_path / "audit" / "run" / "best.pt"
    index = Index.build(best, folder, progress=False)
    picture = folder / rows()[0]["image"]
    hits = index.search(image=picture, k=3)
    query = TrainedRun.open(best, "cpu").picture_features([picture], tmp_path / "cache")[0]
    assert query.shape[-1] == 6 and len(hits) == 3


def test_unknown_encoders_and_missing_weights_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"data\.image_encoder: unknown image encoder 'nope'"):
        create_image_encoder("nope", {})
    with pytest.raises(ConfigError, match=r"data\.caption_encoder_options\.path: a folder"):
        caption_vectors("huggingface", {"path": str(tmp_path)}, ["x"], None)


@pytest.mark.plugins
def test_a_tiny_timm_model_with_local_weights_audits_and_bad_weights_are_refused(tmp_path):
    timm = optional("timm")
    model = timm.create_model("resnet10t", pretrained=False, num_classes=0)
    torch.save(model.state_dict(), tmp_path / "resnet10t.pt")
    torch.save(
        timm.create_model("resnet18", pretrained=False, num_classes=0).state_dict(), tmp_path / "r18.pt"
    )
    with pytest.raises(ConfigError, match=r"r18\.pt does not fit timm's resnet10t"):
        create_image_encoder("timm", {"model": "resnet10t", "checkpoint": str(tmp_path / "r18.pt")})
    folder = write_form("folder-csv", tmp_path / "c")
    weights = {"model": "resnet10t", "checkpoint": str(tmp_path / "resnet10t.pt")}
    options = [
        "model.text_encoder=bigru",
        "model.word_dim=16",
        "data.image_encoder=timm",
        f"data.image_encoder_options={json.dumps(weights)}",
    ]
    result = audit_collection(
        folder, tmp_path / "audit", overrides=[*TINY, *options], progress=False, log=lambda _: None
    )
    assert result.summary["pairs_scored"] == len(rows())


OPEN_CLIP_TINY = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16, "head_width": 16},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}


@pytest.mark.plugins
def test_a_tiny_open_clip_model_audits_with_its_raw_cosine_beside(tmp_path):
    open_clip = optional("open_clip")
    config = tmp_path / "tiny-clip-test.json"
    config.write_text(json.dumps(OPEN_CLIP_TINY))
    open_clip.add_model_config(config)
    torch.manual_seed(0)
    torch.save(open_clip.create_model("tiny-clip-test", pretrained=None).state_dict(), tmp_path / "clip.pt")
    towers = {"config": str(config), "checkpoint": str(tmp_path / "clip.pt")}
    folder = write_form("folder-csv", tmp_path / "c")
    options = [
        "data.image_encoder=open_clip",
        "data.caption_encoder=open_clip",
        f"data.image_encoder_options={json.dumps(towers)}",
        f"data.caption_encoder_options={json.dumps(towers)}",
    ]
    result = audit_collection(
        folder, tmp_path / "audit", overrides=[*TINY, *options], plant=0.3, progress=False, log=lambda _: None
    )
    assert result.summary["pairs_scored"] == len(rows())
    assert result.pairs["raw_similarity"].between(-1, 1).all()
    assert set(result.summary["raw_score"]["detection"]) == {"auc", "average_precision"}

    import mispair

    trained = mispair.train(folder, tmp_path / "train", overrides=[*TINY, *options], progress=False)
    pictures = sorted(folder.rglob("*.png"))[:2]
    images, texts = trained.encode_images(pictures), trained.encode_texts(["a red square", "a cat"])
    assert images.shape == texts.shape == (2, trained.model.dim)  # text queries through the CLIP text tower
    assert np.allclose(np.linalg.norm(images, axis=1), 1, atol=1e-4)
    assert np.allclose(np.linalg.norm(texts, axis=1), 1, atol=1e-4)
