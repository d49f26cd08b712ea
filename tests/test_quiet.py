"""``--quiet``: no progress bar and no progress line (an epoch, a stage), but every note, warning
and result still printed — what the person must know is never hidden by it."""

import contextlib
import io

import pytest

from mispair.cli import main
from mispair.progress import ProgressLine, is_quiet, log_line, set_quiet
from tests.test_cli import TINY


@pytest.fixture
def quiet():
    before = is_quiet()
    set_quiet(True)
    yield
    set_quiet(before)


def test_quiet_log_hides_progress_lines_only(quiet, capsys):
    lines = (ProgressLine("epoch 1/1  trusted_0=4.68"), "note: a note", ProgressLine("audit: ranking"), "22%")
    for line in lines:
        log_line(line)
    assert capsys.readouterr().err.splitlines() == ["note: a note", "22%"]


def test_log_prints_every_line_when_not_quiet(capsys):
    set_quiet(False)
    log_line(ProgressLine("epoch 1/1"))
    assert capsys.readouterr().err == "epoch 1/1\n"


@pytest.mark.parametrize("flags", [[], ["--quiet"]])
def test_train_quiet_prints_no_epoch_line(tmp_path, flags):
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        assert main(["train", *TINY, "--out", str(tmp_path / "run"), *flags]) == 0
    epochs = [line for line in stderr.getvalue().splitlines() if line.startswith("epoch ")]
    assert (len(epochs) == 0) == bool(flags)
    assert "test (" in stdout.getvalue()  # the result is printed either way
