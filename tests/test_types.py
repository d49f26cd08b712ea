"""The type checker CI runs (``mypy``, configured in pyproject.toml) catches a wrong type at the
seams between the layers: a device where the held-out scoring's :class:`Runtime` goes, a dict
where the audit's typed summary goes, a float read as text."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WRONG = """
from mispair.audit.summary import AuditSummary
from mispair.engine.held_out import division_scores
from mispair.engine.run import TrainSummary


def score(config, data, train) -> None:
    division_scores(config, data, train, "cpu")


def lines(summary: AuditSummary, trained: TrainSummary) -> str:
    AuditSummary.lines({"threshold": 0.5}, "out")
    return summary.threshold + trained.best_epoch
"""
RIGHT = """
from pathlib import Path

from mispair.audit.summary import AuditSummary
from mispair.engine.held_out import Runtime, division_scores


def score(config, data, train) -> None:
    division_scores(config, data, train, Runtime())


def lines(summary: AuditSummary) -> list[str]:
    return summary.lines(Path("out"))
"""


def mypy(tmp_path: Path, sources: dict[str, str]) -> dict[str, str]:
    """One run of mypy over the modules ``sources`` (name: text): what it says of each module, and
    under ``""`` anything it says of none (one run: its start-up and cache reading, most of its
    time, paid once)."""
    paths = {name: tmp_path / f"{name}.py" for name in sources}
    for name, source in sources.items():
        paths[name].write_text(source)
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--no-error-summary",
    ]
    files = [str(path) for path in paths.values()]
    done = subprocess.run([*command, *files], cwd=ROOT, capture_output=True, text=True, timeout=900)
    said = dict.fromkeys(["", *sources], "")
    for line in (done.stdout + done.stderr).splitlines(keepends=True):
        file = Path(line.split(":", 1)[0]).name  # by name: mypy's cache may give an earlier run's folder
        said[next((name for name, path in paths.items() if file == path.name), "")] += line
    return said


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_the_type_checker_catches_a_wrong_type_at_the_seams(tmp_path):
    said = mypy(tmp_path, {"seam_wrong": WRONG, "seam_right": RIGHT})
    wrong = said["seam_wrong"]
    assert 'Argument 4 to "division_scores" has incompatible type "str"; expected "Runtime"' in wrong, said
    assert 'Argument 1 to "lines" of "AuditSummary" has incompatible type "dict[str, float]"' in wrong, said
    assert "Incompatible return value type" in wrong, said
    assert said["seam_right"] == said[""] == "", said
