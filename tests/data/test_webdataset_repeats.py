"""A WebDataset shard holding one key several times (issue 58, class 6): every sample under the
repeated key is a refused row with the reason, so the rows given, kept and refused add up (four
samples under one key were one refused row, three lost without a word)."""

import io
import tarfile
from pathlib import Path

from mispair.config import DataConfig
from mispair.data.loading import resolve_source
from mispair.data.readers import reader_of
from tests.data.readers_forms import pictures


def shard(folder: Path, repeats: int = 4) -> Path:
    """20 samples of their own keys, then ``repeats`` samples all under the key ``shared``."""
    folder.mkdir(parents=True)
    drawn = pictures()
    names = [f"{k:05d}" for k in range(20)] + ["shared"] * repeats
    with tarfile.open(folder / "shard-000.tar", "w") as tar:
        for k, name in enumerate(names):
            _, png, captions = drawn[k % len(drawn)]
            for suffix, data in ((".png", png), (".txt", f"{captions[0]} {k}".encode())):
                info = tarfile.TarInfo(name + suffix)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return folder


def test_every_sample_under_a_repeated_key_is_a_refused_row(tmp_path):
    data = resolve_source(DataConfig(root=str(shard(tmp_path / "s")), cache_dir=str(tmp_path / "cache")))
    table = reader_of(data).table(data)
    assert len(table.pairs) == 20 and len(table.refused) == 4  # 24 samples given: 20 + 4
    assert set(table.refused["pair_id"]) == {"shard-000/shared"}
    assert table.refused["reason"].str.contains("appears more than once in the shard \\(4 samples").all()
