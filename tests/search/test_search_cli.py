"""``mispair index`` / ``mispair search`` / ``mispair eval --index`` through ``mispair.cli.main``:
what they print against the Python API, and every mistake (another checkpoint or collection, a
corrupt index, a wrong option) as one line with exit status 2, never a half-written index."""

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("faiss")

from mispair.search import Index
from mispair.search.storage import MANIFEST
from tests.cli_errors import one_line_error

from .conftest import TINY, run_cli


@pytest.fixture(scope="module")
def index_dir(collection, cosine_checkpoint, tmp_path_factory):
    out = tmp_path_factory.mktemp("index") / "syn.index"
    code, stdout, err = run_cli(
        "index", cosine_checkpoint, collection, "--out", out, "--split", "test", "--quiet"
    )
    assert code == 0, err
    assert stdout.startswith(f"wrote {out}: exact flat index of 40 images and 200 captions")
    return out


def test_search_prints_the_apis_hits(index_dir, collection):
    query = (collection / "test_caps.txt").read_text().splitlines()[12]
    code, stdout, err = run_cli("search", index_dir, query, "--top-k", "5", "--json")
    assert code == 0, err
    printed = json.loads(stdout)
    expected = [h.to_dict() for h in Index.load(index_dir).search(query, k=5)]
    assert printed["results"] == "images" and len(printed["hits"]) == len(expected)
    for hit, want in zip(printed["hits"], expected):  # the scores through JSON: float32 printed as text
        assert {**hit, "score": None} == {**want, "score": None}
        assert hit["score"] == pytest.approx(want["score"], rel=1e-6)
    assert [h["rank"] for h in printed["hits"]] == [1, 2, 3, 4, 5]
    code, stdout, err = run_cli("search", index_dir, query, "--top-k", "5")
    lines = stdout.splitlines()
    assert code == 0 and lines[0] == f"images for {query!r} (exact flat)" and len(lines) == 7
    for line, hit in zip(lines[2:], expected):
        rank, score, image, split, caption = line.split(maxsplit=4)
        assert (int(rank), float(score), image, split, caption) == (
            hit["rank"],
            pytest.approx(hit["score"], abs=1e-4),
            hit["image_id"],
            "test",
            hit["caption"],
        )


def test_another_checkpoint_is_a_one_line_error(index_dir, sgr_checkpoint):
    code, _, err = run_cli("search", index_dir, "a query", "--checkpoint", sgr_checkpoint)
    one_line_error(code, err, f"{sgr_checkpoint}: not the checkpoint index {index_dir} was built from")
    code, _, err = run_cli("eval", sgr_checkpoint, "--index", index_dir)
    one_line_error(code, err, "not the checkpoint index")


def test_another_collection_is_a_one_line_error(collection, cosine_checkpoint, tmp_path):
    copy = Path(shutil.copytree(collection, tmp_path / "copy_precomp"))
    assert run_cli("index", cosine_checkpoint, copy, "--out", tmp_path / "idx", "--quiet")[0] == 0
    rerank = ["--rerank", "5", "--top-k", "5"]
    moved = run_cli("search", tmp_path / "idx", "kalone", *rerank, "--data", collection)
    assert moved[0] == 0, moved[2]  # a copy elsewhere with the same content is the same collection
    captions = (copy / "dev_caps.txt").read_text().splitlines()
    (copy / "dev_caps.txt").write_text("\n".join(["a changed caption", *captions[1:]]) + "\n")
    code, _, err = run_cli("search", tmp_path / "idx", "kalone", *rerank)
    one_line_error(code, err, f"{copy}: not the collection index {tmp_path / 'idx'} was built from")
    shutil.rmtree(copy)
    code, _, err = run_cli("search", tmp_path / "idx", "kalone", *rerank)
    one_line_error(code, err, "no such file or folder", "give its place with --data")


def _rewrite(index: Path, name: str, data: bytes) -> None:
    """Replace a file of the index and record its new digest, as a forger would."""
    import hashlib

    (index / name).write_bytes(data)
    manifest = json.loads((index / MANIFEST).read_text())
    manifest["files"][name] = hashlib.sha256(data).hexdigest()
    manifest.get("sizes", {})[name] = len(data)
    (index / MANIFEST).write_text(json.dumps(manifest))


def _edit_manifest(index: Path, **fields) -> None:
    manifest = json.loads((index / MANIFEST).read_text())
    (index / MANIFEST).write_text(json.dumps({**manifest, **fields}))


def _pickled_npy() -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return buffer.getvalue()


CORRUPTIONS = {
    "truncated": (
        lambda i: (i / "images.faiss").write_bytes((i / "images.faiss").read_bytes()[:100]),
        "images.faiss: corrupt",
    ),
    "missing file": (lambda i: (i / "captions.faiss").unlink(), "captions.faiss: cannot read"),
    "manifest not JSON": (lambda i: (i / MANIFEST).write_text("{"), "manifest.json: not valid JSON"),
    "manifest of something else": (
        lambda i: (i / MANIFEST).write_text('{"format": "x"}'),
        "not a mispair index manifest",
    ),
    "manifest with a wrong field": (lambda i: _edit_manifest(i, dim="16"), "dim: missing or not a int"),
    "manifest without a field": (lambda i: _edit_manifest(i, checkpoint={}), "checkpoint.path: missing"),
    "no manifest": (lambda i: (i / MANIFEST).unlink(), "not a mispair index (no manifest.json)"),
    "forged FAISS bytes": (
        lambda i: _rewrite(i, "images.faiss", b"XXXX" + bytes(200)),
        "images.faiss: not a readable FAISS index",
    ),
    "forged empty FAISS index": (
        lambda i: _rewrite(i, "images.faiss", b"IxFI" + bytes(200)),
        "disagree on the number of images",
    ),
    "pickled array": (
        lambda i: _rewrite(i, "image_of_caption.npy", _pickled_npy()),
        "image_of_caption.npy: not a readable .npy array",
    ),
    "sizes disagree": (
        lambda i: _rewrite(i, "collection.json", b'{"image_ids": [], "captions": []}'),
        "disagree on the number of images",
    ),
}


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_corrupt_index_is_a_one_line_error(index_dir, tmp_path, monkeypatch, corruption):
    broken = Path(shutil.copytree(index_dir, tmp_path / "broken.index"))
    damage, message = CORRUPTIONS[corruption]
    damage(broken)
    monkeypatch.setattr(pickle, "loads", _no_pickle)
    monkeypatch.setattr(pickle, "load", _no_pickle)
    code, _, err = run_cli("search", broken, "a query")
    one_line_error(code, err, message)


def test_a_missing_index_is_a_one_line_error(tmp_path):
    code, _, err = run_cli("search", tmp_path / "nothing.index", "a query")
    one_line_error(code, err, "no such index")


def _no_pickle(*args, **kwargs):
    raise AssertionError("an index was unpickled")


def test_loading_and_searching_never_unpickle(index_dir, monkeypatch):
    class NoUnpickler:
        def __init__(self, *args, **kwargs):
            _no_pickle()

    for name, value in (("load", _no_pickle), ("loads", _no_pickle), ("Unpickler", NoUnpickler)):
        monkeypatch.setattr(pickle, name, value)
    assert len(Index.load(index_dir).search("kalone", k=3)) == 3
    assert {p.suffix for p in index_dir.iterdir()} == {
        ".json",
        ".faiss",
        ".npy",
        ".onnx",
    }  # ONNX: protobuf data


def test_the_index_is_written_atomically(index_dir, cosine_checkpoint, collection, tmp_path, monkeypatch):
    out = Path(shutil.copytree(index_dir, tmp_path / "syn.index"))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    build = ["index", cosine_checkpoint, collection, "--out", out, "--quiet", "--split"]
    code, stdout, _ = run_cli(*build, "dev")
    assert code == 0 and "20 images" in stdout and "40 images" not in stdout  # replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["syn.index"]  # no temporary folder left

    def full_disk(self, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full_disk)
    replaced = {p.name: p.read_bytes() for p in out.iterdir()}
    code, _, err = run_cli(*build, "test")
    one_line_error(code, err, f"{out}: cannot write the mispair index (No space left on device)")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == replaced != before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["syn.index"]
    monkeypatch.undo()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("keep")
    code, _, err = run_cli("index", cosine_checkpoint, collection, "--out", tmp_path / "notes", "--quiet")
    one_line_error(code, err, "a folder that does not hold a mispair index")
    (tmp_path / "a_file").write_text("keep")
    code, _, err = run_cli("index", cosine_checkpoint, collection, "--out", tmp_path / "a_file", "--quiet")
    one_line_error(code, err, "exists and is not a folder")
    assert (tmp_path / "notes" / "mine.txt").read_text() == (tmp_path / "a_file").read_text() == "keep"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["search", "{index}"], "exactly one of them"),
        (["search", "{index}", "kalone", "--image", "x.png"], "exactly one of them"),
        (["search", "{index}", "  "], "the query text is empty"),
        (
            ["search", "{index}", "kalone", "--top-k", "20", "--rerank", "10"],
            "--top-k 20: at most --rerank 10",
        ),
        (["search", "{index}", "--image", "missing.png"], "--image missing.png: no such file"),
        (
            ["eval", "{checkpoint}", "--index", "{index}", "--split", "test"],
            "--index: evaluates one checkpoint",
        ),
        (["eval", "{checkpoint}", "--index", "{index}", "--top-k", "5"], "--top-k 5: recall@10 needs lists"),
        (["eval", "{checkpoint}", "--rerank", "5"], "--top-k and --rerank evaluate through an index"),
        (
            ["index", "{checkpoint}", "{collection}", "--out", "{tmp}/x", "--kind", "ivf", "--nlist", "999"],
            "--nlist: 999 cells for 40 vectors",
        ),
        (
            ["index", "{checkpoint}", "{collection}", "--out", "{tmp}/x", "--split", "nope"],
            "split 'nope' not found",
        ),
        (["index", "{checkpoint}", "{tmp}", "--out", "{tmp}/x"], "not a collection"),
    ],
)
def test_usage_mistakes_are_one_line_errors(
    index_dir, cosine_checkpoint, collection, tmp_path, argv, message
):
    names = {"index": index_dir, "checkpoint": cosine_checkpoint, "collection": collection, "tmp": tmp_path}
    argv = [a.format(**names) for a in argv]
    if argv[0] == "index" and "--split" not in argv:
        argv += ["--split", "test"]
    code, _, err = run_cli(*argv, "--quiet")
    one_line_error(code, err, message)
    assert not (tmp_path / "x").exists()


def test_eval_through_the_index_prints_the_full_matrixs_recalls(index_dir, cosine_checkpoint, collection):
    code, stdout, err = run_cli("eval", cosine_checkpoint, "--index", index_dir, "--top-k", "10", "--json")
    assert code == 0, err
    lists = json.loads(stdout)
    full = json.loads(run_cli("eval", cosine_checkpoint, "--data-root", collection, "--json")[1])
    assert {k for k in full if "_r" in k} | {"rsum"} <= lists.keys() <= full.keys()
    assert {k: full[k] for k in lists} == lists
    code, stdout, _ = run_cli("eval", cosine_checkpoint, "--index", index_dir, "--top-k", "10")
    assert code == 0 and stdout.splitlines()[0].endswith("(exact flat, top-10 lists)")


@pytest.fixture(scope="module")
def picture_folder(tmp_path_factory):
    """Six pictures of plain shapes and colours with two captions each (a folder collection)."""
    image = pytest.importorskip("PIL.Image")
    draw = pytest.importorskip("PIL.ImageDraw")
    pytest.importorskip("efficientnet_lite_pytorch")
    root = tmp_path_factory.mktemp("pictures")
    rows = []
    pictures = [
        ("red", "square", "train"),
        ("blue", "circle", "train"),
        ("green", "square", "train"),
        ("red", "circle", "train"),
        ("blue", "square", "dev"),
        ("green", "circle", "test"),
    ]
    for k, (colour, shape, split) in enumerate(pictures):
        picture = image.new("RGB", (64, 64), "white")
        box = (12, 12, 52, 52)
        getattr(draw.Draw(picture), "rectangle" if shape == "square" else "ellipse")(box, fill=colour)
        picture.save(root / f"p{k}.png")
        rows += [f"p{k}.png,a {colour} {shape},{split}", f"p{k}.png,{shape} in {colour},{split}"]
    (root / "captions.csv").write_text("image,caption,split\n" + "\n".join(rows) + "\n")
    return root


def test_a_picture_finds_the_captions_of_its_vector(picture_folder, tmp_path):
    overrides = [o for o in TINY if not o.startswith("data.source")]
    code, _, err = run_cli(
        "train",
        "data.source=folder",
        f"data.root={picture_folder}",
        *overrides,
        "train.batch_size=4",
        "data.min_word_count=1",
        "--out",
        tmp_path / "run",
        "--quiet",
    )
    assert code == 0, err
    code, _, err = run_cli(
        "index", tmp_path / "run" / "best.pt", picture_folder, "--out", tmp_path / "idx", "--quiet"
    )
    assert code == 0, err
    code, stdout, err = run_cli(
        "search", tmp_path / "idx", "--image", picture_folder / "p3.png", "--json", "--top-k", "4"
    )
    assert code == 0, err
    index = Index.load(tmp_path / "idx")
    image = index.image_ids.index("p3.png")
    scores, ids = index.search_vectors(index.vectors("images")[[image]], 4, "captions")
    hits = json.loads(stdout)["hits"]
    assert json.loads(stdout)["results"] == "captions"
    assert [h["caption_index"] for h in hits] == ids[0].tolist()
    np.testing.assert_allclose([h["score"] for h in hits], scores[0], atol=1e-4)
    assert [h["caption"] for h in hits] == [index.captions[c] for c in ids[0]]


def test_a_picture_query_on_features_not_made_from_pictures(index_dir, picture_folder):
    code, _, err = run_cli("search", index_dir, "--image", picture_folder / "p0.png")
    one_line_error(code, err, "features of dimension 1280, the index's model reads 64", "search it by text")


def test_a_run_trained_on_caption_vectors_refuses_a_text_query_in_words():
    from types import SimpleNamespace

    from mispair.config import DataConfig, ModelConfig
    from mispair.errors import DataError
    from mispair.search.model import SearchModel

    config = SimpleNamespace(
        model=ModelConfig(text_encoder="precomputed"), data=DataConfig(text_embedding_column="txt_emb")
    )
    model = SearchModel(SimpleNamespace(config=config, path="runs/clip/best.pt"))
    with pytest.raises(DataError, match=r"best\.pt: trained on caption vectors .*\(txt_emb\).*\(--image\)"):
        model.query_tokens("a red apple")
