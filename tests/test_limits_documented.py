"""docs/reliability.md states every limit with its default, and every range."""

from pathlib import Path

from mispair.limits import DEFAULTS, RANGES, range_text

DOC = (Path(__file__).parents[1] / "docs" / "reliability.md").read_text(encoding="utf-8")


def test_every_limit_is_documented_with_its_default():
    rows = {
        line.split("|")[1].strip(" `"): line.split("|")[2].strip()
        for line in DOC.splitlines()
        if line.startswith("| `MISPAIR_LIMIT_")
    }
    assert rows == {f"MISPAIR_LIMIT_{name}": f"{value:,}" for name, value in DEFAULTS.items()}


def test_every_range_is_documented():
    for name in RANGES:
        assert f"| {range_text(name)} |" in DOC, name
