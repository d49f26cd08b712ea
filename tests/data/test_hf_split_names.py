"""A ``DatasetDict``'s split names are folder names: one named ``../../x`` (or ``/tmp/x``, or
``a/b``) was saved outside the audit's folder by ``mispair.audit(dataset_dict)`` (``save_to_disk``
writes ``folder/<split>``), and a ``dataset_dict.json`` naming it was read from outside the
collection. Refused in one line, nothing written; the writer of a cleaned collection and the
reader refuse the same names."""

import json
from pathlib import Path

import pytest

from mispair.errors import DataError

datasets = pytest.importorskip("datasets")

from mispair.data.readers.hf_dataset import dataset_parts, load_saved, save_input  # noqa: E402


def dataset_dict(*names: str):
    return datasets.DatasetDict(
        {name: datasets.Dataset.from_dict({"a": [k]}) for k, name in enumerate(names)}
    )


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


@pytest.mark.parametrize(
    "split", ["../../x", "../escaped", "/tmp/mispair-split", "a/b", "..", "", "tab\there"]
)
def test_a_split_that_is_not_a_plain_name_is_never_saved(tmp_path, split):
    out = tmp_path / "work" / "audit"
    with pytest.raises(DataError, match=r"the split .*: not a plain name") as caught:
        save_input(dataset_dict("train", split), out)
    assert "\n" not in str(caught.value)
    assert files_under(tmp_path) == set(), "nothing written, inside or outside"
    assert not Path("/tmp/mispair-split").exists()


def test_plain_split_names_are_saved(tmp_path):
    saved = save_input(dataset_dict("train", "validation", "test-2024"), tmp_path / "out")
    assert sorted(name for name, _ in dataset_parts(load_saved(saved), "x")) == [
        "test-2024",
        "train",
        "validation",
    ]


@pytest.mark.parametrize("split", ["../../etc", "/etc", "sub/../../x"])
def test_a_saved_folder_naming_a_split_outside_is_not_read(tmp_path, split):
    folder = tmp_path / "collection"
    dataset_dict("train").save_to_disk(str(folder))
    (folder / "dataset_dict.json").write_text(json.dumps({"splits": ["train", split]}))
    with pytest.raises(DataError, match=r"dataset_dict\.json: the split"):
        load_saved(folder)


@pytest.mark.parametrize("text", ["[1, 2]", '{"splits": "train"}', "{" * 100 + "}" * 100])
def test_a_damaged_dataset_dict_json_is_one_line(tmp_path, text):
    folder = tmp_path / "collection"
    dataset_dict("train").save_to_disk(str(folder))
    (folder / "dataset_dict.json").write_text(text)
    with pytest.raises(DataError) as caught:
        load_saved(folder)
    assert "dataset_dict.json" in str(caught.value)


def test_the_writer_refuses_the_same_names(tmp_path):
    with pytest.raises(DataError, match="not a plain name"):
        dataset_parts(dataset_dict("train", "../../x"), "the cleaned collection")
