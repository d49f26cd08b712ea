"""Tests build their small runs on ``load_config(None, ...)``: the embedded default run with
overrides. That default trains on the pretrained backbone (frozen MiniLM), which costs a model load
and a pass over every synthetic caption; tests get the small BiGRU model instead, unless marked
``pretrained_default`` (tests of the backbone itself set ``model.text_encoder=minilm``).

The suite runs on the CPU unless ``MISPAIR_TEST_DEVICE=cuda`` (then every test sees the GPU, and
``tests/test_cuda.py`` compares the CUDA paths with the CPU's). The test run caches into a folder
of its own (``MISPAIR_CACHE``, unless set already), never into the user's cache folder;
subprocesses inherit it. Torch and BLAS get one CPU thread (``OMP_NUM_THREADS``, unless set
already). ``form_audit`` audits the readers' small collection in a form once a session, for the
tests that only read that audit."""

import contextlib
import os
import shutil
import tempfile

if os.environ.get("MISPAIR_TEST_DEVICE", "cpu") == "cpu":
    # The suite's references are CPU arithmetic (exact resumes, side-by-side equalities, golden
    # runs), so it runs on the CPU even where a GPU is visible, as CI does (subprocesses inherit
    # this); MISPAIR_TEST_DEVICE=cuda shows the GPU to every test (tests/test_cuda.py among them).
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

# One CPU thread for torch and BLAS, here and in the subprocesses the tests start (unless set
# already): set before anything imports them. The tests' models and arrays are tiny, so a second
# thread hardly helps on an idle machine, and on a shared one OpenMP threads that wait for each
# other ran the suite's trainings 5-20 times slower (tests/engine/test_decoys.py: 45 s with one
# thread under a load of 6, 320 s with two under a load of 3; about 20 s either way when idle).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest

from mispair import config

SMALL_MODEL = {
    "head": "cosine",
    "text_encoder": "bigru",
    "image_pooling": "fragments",
    "embed_dim": 256,
    "word_dim": 300,
}


@pytest.fixture(autouse=True)
def small_default_model(request, monkeypatch):
    if request.node.get_closest_marker("pretrained_default") is None:
        monkeypatch.setitem(config.DEFAULT_RUN, "model", dict(SMALL_MODEL))


@contextlib.contextmanager
def small_model():
    """The small default model inside a fixture of a module, package or session: such a fixture is
    set up before ``small_default_model``, which patches each test, so without it the runs it
    builds on the default run train the pretrained backbone."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(config.DEFAULT_RUN, "model", dict(SMALL_MODEL))
        yield


_OWN_CACHE: list[str] = []
_SESSION_CACHE: list[str] = []  # the cache folder of the session (a test may set its own)


def pytest_configure(config):
    if "MISPAIR_CACHE" not in os.environ:
        _OWN_CACHE.append(tempfile.mkdtemp(prefix="mispair-test-cache-"))
        os.environ["MISPAIR_CACHE"] = _OWN_CACHE[0]
    _SESSION_CACHE[:] = [os.environ["MISPAIR_CACHE"]]


def pytest_unconfigure(config):
    for folder in _OWN_CACHE:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop("MISPAIR_CACHE", None)


@pytest.fixture(scope="session")
def form_audit(tmp_path_factory):
    """``form_audit(form, *options)``: ``(collection, audit folder, AuditResult)`` of the tiny
    audit (``tests.tiny.TINY_FORM_AUDIT`` and ``options``) of the readers' small collection
    written in ``form`` (``tests/data/readers_forms.py``), run once a session and shared by the
    tests that only read it (``tests/audit/test_audit_forms.py``, ``test_apply_forms.py``). It
    runs as a test's audit would (the small default model), whichever test or fixture asks first,
    and caches into the session's cache folder, where ``mispair apply`` of it looks for the
    pictures it unpacked."""
    from mispair.audit import audit_collection
    from tests.data.readers_forms import write_form
    from tests.tiny import TINY_FORM_AUDIT

    done: dict[tuple, tuple] = {}

    def audit(form: str, *options: str) -> tuple:
        if (form, options) not in done:
            path = write_form(form, tmp_path_factory.mktemp(form))
            out = tmp_path_factory.mktemp(f"{form}-audit")
            with small_model(), pytest.MonkeyPatch.context() as patch:
                patch.setenv("MISPAIR_CACHE", _SESSION_CACHE[0])
                overrides = [*TINY_FORM_AUDIT, *options]
                result = audit_collection(path, out, overrides=overrides, progress=False, log=lambda _: None)
            done[form, options] = path, out, result
        return done[form, options]

    return audit
