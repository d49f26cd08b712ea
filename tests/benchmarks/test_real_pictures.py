"""benchmarks/real_pictures.py without an audit: 60 pictures rendered from the real sources are
pairwise distinct in their pixels, each caption names its object(s) and every variation of its
picture, the derangement moves exactly the planted share of captions and none back to its own
picture, and the truth file says which; the slow test runs the script end to end on 300."""

import csv
import hashlib
import importlib
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
SOURCES = ("/usr/share/tuxpaint/stamps", "/usr/share/openclipart/png", "/usr/share/icons/Adwaita")
pytestmark = pytest.mark.skipif(
    not all(Path(s).is_dir() for s in SOURCES), reason="the offline sources (Tux Paint, OpenClipart, Adwaita)"
)
N, NOISE = 60, 0.2


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("real_pictures")
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture(scope="module")
def rendered(bench, tmp_path_factory):
    """60 pictures from 10 objects of each source (OpenClipart's food clips), 20% deranged."""
    work = tmp_path_factory.mktemp("real_pictures")
    found = bench.find_bases(per_source=10, clip_folder="food")
    bases, _ = bench.prepare_bases(work / "bases", found, 160, progress=lambda _: None)
    collection = bench.make_collection(
        work / "n60", bases, work / "bases" / "bases.npy", N, NOISE, 0, "jpeg", 160, progress=lambda _: None
    )
    return bases, collection, work / "n60"


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_the_bases_come_from_every_source(rendered):
    bases, _, _ = rendered
    assert Counter(b.source for b in bases) == {"tuxpaint": 10, "openclipart": 10, "icons": 10}
    assert all(b.noun and b.noun == b.noun.strip() for b in bases)


def test_the_pictures_are_pairwise_distinct(rendered):
    _, collection, root = rendered
    rows = read_rows(collection.folder / "captions.csv")
    assert len(rows) == N
    digests = []
    for row in rows:
        with Image.open(collection.folder / row["image"]) as image:
            assert image.size == (160, 160) and image.format == "JPEG"
            digests.append(hashlib.sha1(np.asarray(image.convert("RGB")).tobytes()).hexdigest())
    assert len(set(digests)) == N
    pictures = read_rows(root / "pictures.csv")
    assert [p["pixel_digest"] for p in pictures] == digests
    keys = [
        tuple(p[k] for k in ("base", "second", "framing", "rotation", "tint", "background")) for p in pictures
    ]
    assert len(set(keys)) == N


def test_every_caption_names_its_objects_and_variations(bench, rendered):
    bases, _, root = rendered
    noun = {b.path: b.noun for b in bases}
    layouts = Counter()
    for p in read_rows(root / "pictures.csv"):
        caption = p["own_caption"]
        layouts[p["layout"]] += 1
        assert noun[p["base"]] in caption and caption.endswith(f"{p['background']} background")
        if p["layout"] == "two":
            left, right = f"{noun[p['base']]} on the left", f"{noun[p['second']]} on the right"
            assert left in caption and right in caption
            continue
        framing = p["framing"]
        expected = {"large": "a large ", "close-up": "a close-up of ", "middle": " in the middle "}
        assert expected.get(framing, f" at the {framing} ") in caption
        assert caption.startswith("a small ") == (framing not in ("large", "close-up"))
        assert (f"{p['tint']}-tinted {noun[p['base']]}" in caption) if p["tint"] else "-tinted" not in caption
        turns = [r for r in bench.ROTATIONS if r and r in caption]
        assert turns == ([p["rotation"]] if p["rotation"] else [])
    assert layouts["one"] and layouts["two"]
    assert len({p["own_caption"] for p in read_rows(root / "pictures.csv")}) == N


def test_the_derangement_moves_exactly_the_planted_captions_and_the_truth_says_so(rendered):
    _, collection, root = rendered
    own = [p["own_caption"] for p in read_rows(root / "pictures.csv")]
    shown = [r["caption"] for r in read_rows(collection.folder / "captions.csv")]
    truth = read_rows(root / "truth.csv")
    assert [t["pair_id"] for t in truth] == [str(k) for k in range(N)]
    planted = [k for k, t in enumerate(truth) if t["mismatched"] == "1"]
    assert {t["mismatched"] for t in truth} == {"0", "1"}
    assert len(planted) == round(NOISE * N) == collection.planted
    assert all(shown[k] != own[k] for k in planted)
    assert all(shown[k] == own[k] for k in range(N) if k not in planted)
    assert sorted(shown[k] for k in planted) == sorted(own[k] for k in planted)  # among themselves
    assert not (collection.folder / "truth.csv").exists()  # the truth lies outside what the audit reads


@pytest.mark.parametrize("n,share", [(10, 0.2), (7, 0.15), (1000, 0.2), (50, 0.0), (40, 0.99)])
def test_derange_has_no_fixed_point_and_plants_the_share(bench, n, share):
    for seed in range(20):
        shown, planted = bench.derange(n, share, np.random.default_rng(seed))
        assert len(planted) == max(round(share * n), 2 if round(share * n) == 1 else 0)
        assert (shown[planted] != planted).all()
        moved = np.flatnonzero(shown != np.arange(n))
        assert moved.tolist() == planted.tolist() and sorted(shown[planted]) == planted.tolist()


def test_nouns_drop_the_article_and_the_full_stop(bench):
    assert bench.noun_of("A singing dinosaur!") == "singing dinosaur"
    assert bench.noun_of("A European coin of 20 cents (0.20 €).") == "European coin of 20 cents (0.20 €)"
    assert bench.noun_of("Brown hair.") == "brown hair"
    assert bench.noun_of("lightbulb-brightlit") == "lightbulb brightlit"
    assert bench.noun_of("New Zealand Maori") == "New Zealand Maori"


def test_the_fit_is_a_line_and_the_exponents_say_linear(bench):
    a, b = bench.line_fit([1000, 3000], [12.0, 32.0])
    assert a == pytest.approx(2.0) and b == pytest.approx(0.01)
    assert bench.verdict(bench.exponents([1000, 2000, 4000], [10.0, 20.0, 40.0])) == "linear"
    assert bench.verdict(bench.exponents([1000, 2000], [10.0, 14.0])).startswith("below")
    assert bench.verdict(bench.exponents([1000, 2000], [10.0, 9.0])).startswith("flat")
    assert "flat" in bench.fit_row("map", [1000, 2000], [2.0, 1.5], "s", (100_000,))


def test_a_non_empty_work_folder_is_refused(bench, tmp_path):
    (tmp_path / "something").write_text("x")
    with pytest.raises(SystemExit, match="not empty"):
        bench.main(["--sizes", "100", "--work", str(tmp_path)])


@pytest.mark.slow  # the default audit of 300 pictures, 2-4 minutes on two shared cores
def test_the_script_runs_end_to_end(tmp_path):
    work, out = tmp_path / "work", tmp_path / "section.md"
    command = [sys.executable, str(BENCHMARKS / "real_pictures.py"), "--sizes", "300", "--work", str(work)]
    subprocess.run(
        [*command, "--bases-per-source", "60", "--write", str(out)], check=True, cwd=BENCHMARKS.parent
    )
    section = out.read_text(encoding="utf-8")
    assert "| 300 | 60 |" in section and "AUC" in section
    row = next(line for line in section.splitlines() if line.startswith("| 300 |")).split(" | ")
    head = next(line for line in section.splitlines() if line.startswith("| pictures |")).split(" | ")
    auc = float(row[head.index("AUC (probability)")])
    assert 0.6 < auc <= 1.0
    assert (work / "n300" / "audit" / "pairs.csv").is_file() and (work / "n300" / "cache").is_dir()


def test_detection_scores_the_audit_against_the_truth_as_a_loop_does(bench, tmp_path):
    """AUCs as scikit-learn's, and the realised FDR of the suspected pairs as a loop counts it."""
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    n = 200
    mismatched = rng.random(n) < 0.3
    probability = np.clip(mismatched * 0.5 + rng.random(n) * 0.6, 0, 1).round(4)
    score = rng.normal(size=n).round(5) - mismatched
    suspected = probability > 0.45  # some matched pairs among them
    with open(tmp_path / "pairs.csv", "w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        out.writerow(["pair_id", "caption", "mismatch_probability", "held_out_score", "suspected"])
        for i in rng.permutation(n):  # another row order than the truth's
            out.writerow([f"{i:04d}", "a caption", probability[i], score[i], bool(suspected[i])])
    with open(tmp_path / "truth.csv", "w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        out.writerow(["pair_id", "mismatched"])
        out.writerows([f"{i:04d}", int(mismatched[i])] for i in range(n))
    auc_probability, auc_score, fdr = bench.detection(tmp_path / "pairs.csv", tmp_path / "truth.csv")
    assert auc_probability == pytest.approx(roc_auc_score(mismatched, probability))
    assert auc_score == pytest.approx(roc_auc_score(mismatched, -score))
    wrong = sum(1 for i in range(n) if suspected[i] and not mismatched[i])
    assert fdr == pytest.approx(wrong / sum(suspected)) and 0 < fdr < 1
