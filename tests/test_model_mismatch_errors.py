"""One line and exit status 2 when a model and what it is given do not fit (issue 19, item 3 and
7): a checkpoint whose weights do not fit its recorded model, a checkpoint evaluated on features
of another size, a head sized for another number of regions, a pickled checkpoint, a device the
machine does not have (named by the option the user gave); and ``--quiet`` silences every bar."""

import contextlib
import io

import numpy as np
import pytest
import torch

from mispair.cli import main
from mispair.data.precomp import write_precomp
from mispair.data.synthetic import make_synthetic
from mispair.engine.assembly import pick_device
from mispair.errors import ConfigError
from mispair.progress import progress_bar, set_quiet
from tests.cli_errors import one_line_error
from tests.conftest import small_model

TINY = [
    "data.synthetic_images=60",
    "model.embed_dim=16",
    "model.word_dim=8",
    "train.epochs=1",
    "train.batch_size=30",
    "train.threads=1",
]


def run_cli(*argv) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([str(a) for a in argv])
    return code, err.getvalue()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    with small_model():  # the tests' model (a module's fixture is set up before the test's patch)
        code, err = run_cli("train", "data.source=synthetic", *TINY, "--out", out, "--quiet")
    assert code == 0, err
    return out


def _precomp(root, fragments: int, dim: int) -> None:
    rng = np.random.default_rng(0)
    for split in ("train", "dev", "test"):
        pairs = make_synthetic(20, 5, seed=1)
        pairs.images = rng.normal(size=(20, fragments, dim)).astype(np.float32)
        write_precomp(pairs, root, split)


@pytest.mark.parametrize(("fragments", "dim"), [(36, 7), (5, 2048), (1, 1)])
def test_a_checkpoint_evaluated_on_features_of_another_size(trained, tmp_path, fragments, dim):
    _precomp(tmp_path / "other_precomp", fragments, dim)
    code, err = run_cli("eval", trained / "best.pt", "--data-root", tmp_path / "other_precomp")
    one_line_error(code, err, f"image features of dimension {dim}", "built for")


@pytest.mark.parametrize("edit", ["drop", "reshape", "rename"])
def test_a_checkpoint_whose_weights_do_not_fit_its_model(trained, tmp_path, edit):
    state = torch.load(trained / "best.pt", weights_only=True)
    weights = state["models"][0]
    key = next(iter(weights))
    if edit == "drop":
        del weights[key]
    elif edit == "reshape":
        weights[key] = torch.zeros(3, 3)
    else:
        weights["head.extra"] = weights.pop(key)
    torch.save(state, tmp_path / "edited.pt")
    code, err = run_cli("eval", tmp_path / "edited.pt")
    one_line_error(code, err, "edited.pt: its weights do not fit the model its config records")


@pytest.mark.parametrize(("head", "regions"), [("sgr", 36), ("saf", 36), ("sgr", 10)])
def test_a_head_sized_for_another_number_of_regions(tmp_path, head, regions):
    _precomp(tmp_path / "grid_precomp", 49, 32)
    code, err = run_cli(
        "train",
        "data.source=precomp",
        f"data.root={tmp_path / 'grid_precomp'}",
        f"model.head={head}",
        f"model.head_options={{num_regions: {regions}}}",
        *TINY,
        "--out",
        tmp_path / "out",
        "--quiet",
    )
    one_line_error(code, err, f"sized for {regions} fragments per image", "num_regions=49")


@pytest.mark.parametrize("payload", [object, {"models": [torch.nn.Linear(2, 2)]}, np.dtype])
def test_a_pickled_checkpoint_is_refused_without_suggesting_to_unpickle_it(tmp_path, payload):
    torch.save(payload, tmp_path / "pickled.pt")
    code, err = run_cli("eval", tmp_path / "pickled.pt")
    one_line_error(code, err, "pickled.pt: holds pickled Python objects, which mispair never loads")
    assert "weights_only" not in err


DEVICES = [
    ("tpu", "unknown device"),
    ("cuda:0", "not available"),
    ("meta", "not supported"),
    ("gpu!", "unknown device"),
]


@pytest.mark.parametrize(("name", "fragment"), DEVICES)
def test_a_device_error_names_the_option_given(trained, name, fragment):
    if name.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ConfigError, match=f"^train.device: .*{fragment}"):
        pick_device(name)
    code, err = run_cli("eval", trained / "best.pt", "--device", name)
    one_line_error(code, err, "--device: ", fragment)


def test_quiet_silences_every_progress_bar(capsys):
    try:
        set_quiet(True)
        for _ in progress_bar(range(3), desc="shown?"):
            pass
        assert "shown?" not in capsys.readouterr().err
    finally:
        set_quiet(False)
    for _ in progress_bar(range(3), desc="shown?", mininterval=0):
        pass
    assert "shown?" in capsys.readouterr().err
