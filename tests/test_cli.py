"""The command line through ``mispair.cli.main``: what each subcommand prints and writes, checked
against the library calls it stands for; user mistakes are one line and exit status 2.

Covered elsewhere: bad option values (tests/test_options.py), a missing checkpoint and bad
overrides without ``--out`` (tests/engine/test_resume.py), ``--export-pairs`` of a noisy division
run and into a missing or unwritable path (tests/test_export.py)."""

import contextlib
import csv
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from mispair.cli import main
from mispair.config import load_config
from mispair.data.batching import TrainingPairs
from mispair.data.noise import NoiseRecord, inject_noise
from mispair.data.precomp import read_precomp
from mispair.data.synthetic import make_synthetic
from mispair.engine.assembly import load_run_data
from mispair.engine.metrics import format_metrics
from mispair.engine.trained import TrainedRun
from mispair.methods import list_recipes
from mispair.nn.heads import list_heads
from mispair.nn.text import list_text_encoders
from tests.cli_errors import one_line_error
from tests.conftest import small_model

TINY = [
    "data.source=synthetic",
    "data.synthetic_images=100",
    "model.embed_dim=16",
    "model.word_dim=8",
    "train.epochs=1",
    "train.batch_size=50",
    "train.threads=1",
]


def parse_table(text: str) -> dict[str, float]:
    """The numbers of a :func:`format_metrics` table, keyed as in the metrics dict."""
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[-1:] == ["rsum"])
    words, keys = lines[head].split(), []
    while words:
        keys.append(words.pop(0) if words[0] == "rsum" else f"{words.pop(0)}_{words.pop(0)}")
    out = {}
    for line in lines[head + 1 :]:
        label, *values = line.split()
        if label in ("strict", "equiv."):
            prefix = "" if label == "strict" else "eq_"
            assert len(values) == len(keys), line
            out.update({prefix + k: float(v) for k, v in zip(keys, values)})
    ranks = re.search(r"^medr i2t (\S+) t2i (\S+); meanr i2t (\S+) t2i (\S+)$", lines[-1], re.M)
    assert ranks, lines[-1]
    names = ("i2t_medr", "t2i_medr", "i2t_meanr", "t2i_meanr")
    out.update({k: float(v) for k, v in zip(names, ranks.groups())})
    return out


def assert_shows(table: dict[str, float], metrics: dict[str, float], keys) -> None:
    for key in keys:  # printed with one decimal (medians with none)
        places = 0 if key.endswith("medr") else 1
        assert table[key] == pytest.approx(round(metrics[key], places), abs=1e-9), key


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One tiny ``mispair train ... --export-pairs``: its folder, stdout and config."""
    root = tmp_path_factory.mktemp("cli")
    out, pairs = root / "run", root / "pairs.csv"
    stdout, stderr = io.StringIO(), io.StringIO()
    with small_model(), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = main(["train", *TINY, "--out", str(out), "--quiet", "--export-pairs", str(pairs)])
        config = load_config(None, [*TINY, f"output={out}"])
    assert status == 0, stderr.getvalue()
    return out, pairs, stdout.getvalue(), stderr.getvalue(), config


def test_recipes_lists_every_registered_name(capsys):
    assert main(["recipes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    listed = dict(line.split(":", 1) for line in lines)
    assert list(listed) == ["recipes", "heads", "text encoders"]
    assert listed["recipes"].strip().split(", ") == list_recipes()
    assert listed["heads"].strip().split(", ") == list_heads()
    assert listed["text encoders"].strip().split(", ") == list_text_encoders()
    assert {"vse", "rcl"} <= set(list_recipes())


def test_inject_noise_writes_the_librarys_record(tmp_path, capsys):
    out = tmp_path / "noise.npy"
    argv = [
        "inject-noise",
        "--images",
        "20",
        "--captions-per-image",
        "5",
        "--rate",
        "0.4",
        "--protocol",
        "pmp",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    record, expected = NoiseRecord.load(out), inject_noise(20, 5, 0.4, "pmp", 0)
    assert np.array_equal(record.image_of_caption, expected.image_of_caption)
    assert np.array_equal(record.true_image, expected.true_image)
    assert np.array_equal(record.is_noisy, expected.is_noisy) and 0 < expected.is_noisy.sum() < 100
    printed = capsys.readouterr().out.strip()
    assert printed == (
        f"wrote {out}: 100 captions, {expected.is_noisy.sum()} truly mismatched "
        f"({100 * expected.noise_rate:.1f}%)"
    )


def test_prepare_synthetic_then_inject_noise_from_the_folder(tmp_path, capsys):
    folder = tmp_path / "syn"
    assert main(["prepare", "synthetic", "--out", str(folder), "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == f"prepared synthetic in {folder}"
    for seed, (split, n) in enumerate([("train", 1000), ("dev", 100), ("test", 200)]):
        pairs, expected = read_precomp(folder, split), make_synthetic(n, seed=seed)
        assert pairs.n_images == n and pairs.captions == expected.captions
        assert np.allclose(np.asarray(pairs.images), expected.images)
    out = tmp_path / "dev_noise.npy"
    argv = [
        "inject-noise",
        "--data",
        str(folder),
        "--split",
        "dev",
        "--rate",
        "0.2",
        "--protocol",
        "ncr",
        "--seed",
        "3",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    expected = inject_noise(100, 5, 0.2, "ncr", 3)
    assert np.array_equal(NoiseRecord.load(out).image_of_caption, expected.image_of_caption)
    assert f"500 captions, {expected.is_noisy.sum()} truly mismatched" in capsys.readouterr().out


def test_train_prints_the_test_metrics_it_saves(tiny_run):
    out, _, stdout, _, _ = tiny_run
    metrics = json.loads((out / "metrics.json").read_text())
    assert stdout.splitlines()[0] == f"test ({out / 'best.pt'}, best epoch {metrics['best_epoch'] + 1})"
    table = parse_table(stdout)
    assert "eq_rsum" not in table  # no equivalent-caption metrics on synthetic data
    assert table["rsum"] == pytest.approx(round(metrics["test"]["rsum"], 1), abs=1e-9)
    assert_shows(table, metrics["test"], list(metrics["test"]))
    recalls = [v for k, v in table.items() if re.fullmatch(r"(i2t|t2i)_r\d+", k)]
    assert len(recalls) == 6 and table["rsum"] == pytest.approx(sum(recalls), abs=0.35)


def test_eval_json_is_the_saved_test_metrics(tiny_run, capsys):
    out, _, train_stdout, _, _ = tiny_run
    assert main(["eval", str(out / "best.pt"), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads((out / "metrics.json").read_text())["test"]
    assert main(["eval", str(out / "best.pt"), "--quiet"]) == 0  # the table, as train printed it
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == f"{out / 'best.pt'} on test"
    assert printed.splitlines()[1:] == train_stdout.splitlines()[1:]


def test_export_pairs_writes_one_row_per_training_caption(tiny_run):
    out, path, _, stderr, config = tiny_run
    rows = list(csv.DictReader(path.open(newline="")))
    # no noise is known and vse has no clean probability: only the pair and its similarity
    assert list(rows[0]) == ["caption_index", "image_id", "caption", "similarity"]
    train = load_run_data(config).train
    assert len(rows) == train.n_captions == 500
    assert [int(r["caption_index"]) for r in rows] == list(range(500))
    assert [r["caption"] for r in rows] == train.captions
    assert [r["image_id"] for r in rows] == [train.image_ids[k // 5] for k in range(500)]
    run = TrainedRun.open(out / "best.pt", "cpu")
    (model,) = run.models
    batch = TrainingPairs(train, run.tokens(train)).batch(np.arange(500))
    with torch.no_grad():
        expected = model(batch.images, batch.tokens, batch.lengths).diagonal()
    got = torch.tensor([float(r["similarity"]) for r in rows])
    assert torch.allclose(got, expected, atol=2e-6, rtol=0)
    assert f"wrote 500 training pairs to {path}" in stderr


def _write_bad_yaml(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text("trian:\n  epochs: 1\n")
    return str(path)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (lambda d: ["train", "bogus.key=1", *TINY, "--out", f"{d}/run", "--quiet"], "bogus"),
        (lambda d: ["train", f"{d}/none.yaml", "--out", f"{d}/run", "--quiet"], "none.yaml"),
        (lambda d: ["train", _write_bad_yaml(d), "--out", f"{d}/run", "--quiet"], "trian"),
        (lambda d: ["train", "recipe=rcl", "method.loss=hinge", *TINY, "--out", f"{d}/run"], "method.loss"),
        (lambda d: ["inject-noise", "--rate", "0.4", "--out", f"{d}/n.npy"], "--images"),
        (lambda d: ["inject-noise", "--images", "9", "--rate", "1.5", "--out", f"{d}/n.npy"], "1.5"),
    ],
)
def test_a_user_mistake_is_one_line_exit_2_and_writes_nothing(argv, named, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a default output (runs/...) would land here too
    args = argv(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    assert main(args) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mispair: error: ") and named in err[0], err
    assert captured.out == ""
    assert sorted(tmp_path.rglob("*")) == before


def test_an_interrupted_command_exits_130_with_one_line(tmp_path, capsys, monkeypatch):
    seen = []

    def interrupted(config, **kwargs):
        seen.append(config)
        raise KeyboardInterrupt

    monkeypatch.setattr("mispair.engine.run.train_run", interrupted)
    assert main(["train", *TINY, "--out", str(tmp_path / "run"), "--quiet"]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["mispair: interrupted (rerun the same command to resume)"]
    assert seen[0].output == str(tmp_path / "run") and seen[0].train.epochs == 1


def test_format_metrics_shows_the_numbers_it_is_given():
    keys = ["i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10", "rsum"]
    metrics = {k: 3.14 * (i + 1) for i, k in enumerate(keys)}
    metrics |= {"eq_" + k: 100 - 2.26 * i for i, k in enumerate(keys)}
    metrics |= {"i2t_medr": 7.0, "t2i_medr": 12.0, "i2t_meanr": 20.25, "t2i_meanr": 33.04}
    text = format_metrics(metrics, "my title")
    assert text.splitlines()[0] == "my title"
    assert_shows(parse_table(text), metrics, list(metrics))
    assert "equiv." not in format_metrics({k: v for k, v in metrics.items() if "eq_" not in k})
    assert format_metrics(metrics).splitlines()[0].split()[-1] == "rsum"  # no title line


@pytest.mark.parametrize(
    "argv",
    [
        ["eval", "run/best.pt", "--folds", "0"],
        ["eval", "run/best.pt", "--folds", "five"],
        ["train", "--no-such-flag"],
        ["prepare", "not-a-dataset"],
        [],
    ],
)
def test_a_usage_mistake_is_one_line_and_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1 and err[0].startswith("mispair")
    assert "error: " in err[0]


def test_overrides_may_follow_the_options(tmp_path):
    from mispair.cli import parse

    args = parse(["train", "a.yaml", "train.lr=0.01", "--out", str(tmp_path), "train.epochs=2", "--quiet"])
    assert args.config == "a.yaml" and args.overrides == ["train.lr=0.01", "train.epochs=2"]
    assert args.out == str(tmp_path) and args.quiet


@pytest.mark.parametrize("case", ["out_is_a_file", "out_under_a_file", "empty_noise_file", "empty_features"])
def test_bad_paths_are_one_line_and_exit_2(tmp_path, capsys, case):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "empty.npy").write_bytes(b"")
    out = tmp_path / "run"
    args = ["train", "data.source=synthetic", "data.synthetic_images=50", "train.epochs=1"]
    if case == "out_is_a_file":
        out = tmp_path / "afile"
    elif case == "out_under_a_file":
        out = tmp_path / "afile" / "run"
    elif case == "empty_noise_file":
        args.append(f"data.noise.file={tmp_path / 'empty.npy'}")
    else:
        assert main(["prepare", "synthetic", "--out", str(tmp_path / "syn"), "--quiet"]) == 0
        (tmp_path / "syn" / "dev_ims.npy").write_bytes(b"")
        args += ["data.source=precomp", f"data.root={tmp_path / 'syn'}"]
    capsys.readouterr()
    assert main([*args, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mispair: error: ")
    assert ("empty" in err[0]) == case.startswith("empty")
    assert (tmp_path / "afile").read_text() == "x"


@pytest.mark.parametrize(
    ("argv", "named", "not_named"),
    [
        (["search"], ["index", "`mispair search --help`"], ["COMMAND"]),
        (["audit"], ["data", "--out", "`mispair audit --help`"], ["overrides"]),
    ],
)
def test_a_missing_argument_names_it_and_the_commands_own_help(argv, named, not_named, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    one_line_error(exit_info.value.code, err, *named)
    assert not any(word in err for word in not_named), err


def _audit_summary(**changes):
    metrics = {f"{d}_r{k}": 10.0 for d in ("i2t", "t2i") for k in (1, 5, 10)} | {"rsum": 60.0}
    summary = {
        "estimated_mismatched_share_interval": [0.3, 0.5], "estimated_mismatched_share": 0.4,
        "pairs_by_split": {"train": 8, "test": 2}, "pairs_scored": 10, "pairs": 10,
        "collection_name": "c", "suspected": 4, "detection": None, "self_check": None,
        "retrieval": {"test": metrics, "clean_run_test": None},
    }  # fmt: skip
    return summary | changes


def format_audit(summary: dict, out: Path) -> str:
    """The lines ``mispair audit`` prints for ``summary`` (as ``summary.json`` holds it)."""
    from mispair.audit.summary import AuditSummary

    return "\n".join(AuditSummary.from_dict(summary).lines(out))


def test_the_cli_and_the_report_advise_the_same_plant():
    """Issue 52: the CLI advised ``--plant 0.1``, the report ``--plant 0.2``."""
    import mispair.audit

    advised = re.findall(r"--plant (\d\.\d+)", format_audit(_audit_summary(), Path("out")))
    template = (Path(mispair.audit.__file__).parent / "report.html.j2").read_text(encoding="utf-8")
    assert advised and set(re.findall(r"--plant (\d\.\d+)", template)) == set(advised)


def test_the_audit_says_what_its_share_rests_on():

    unchecked = format_audit(_audit_summary(), Path("out"))
    assert "errs high" in unchecked and "--plant" in unchecked
    check = {"measured_auc": 0.77, "estimated_auc": 0.77, "originals_mismatched_share": 0.47,
             "share_upper_bound": 0.46, "consistent": False, "planted": 28, "originals": 318}  # fmt: skip
    detection = {"auc": 0.77, "average_precision": 0.2, "precision": 0.1, "recall": 1.0}
    flagged = format_audit(_audit_summary(self_check=check, detection=detection, truth="t"), Path("o"))
    assert "at least 0.770" in flagged and "at most 46%" in flagged and "errs high" not in flagged
    consistent = format_audit(_audit_summary(self_check={**check, "consistent": True}, detection=detection,
                                             truth="t"), Path("o"))  # fmt: skip
    assert "about 0.770" in consistent and "overstated" not in consistent


def test_the_audit_says_how_clean_the_pairs_it_leaves_are():
    detection = {"auc": 0.9, "average_precision": 0.8, "precision": 0.7, "recall": 0.75,
                 "kept_precision": 0.834, "kept_recall": 0.91}  # fmt: skip
    text = format_audit(_audit_summary(detection=detection, truth="the planted mismatches"), Path("o"))
    assert "the pairs left unsuspected are 83% truly matched (keeping 91% of the matched pairs)" in text


def test_an_error_quoting_a_huge_value_is_one_short_line():
    """Issue 64: an error that repeated a 10 MB pair id whole printed one line of 10 million
    characters; every message is cut at MESSAGE_CHARS with how much was left out."""
    from mispair.errors import MESSAGE_CHARS, DataError

    text = str(DataError("pair " + "x" * 10_000_000 + " is not in this audit"))
    assert len(text) <= MESSAGE_CHARS and text.endswith("more characters)") and "\n" not in text
    assert str(DataError("a short one")) == "a short one"
