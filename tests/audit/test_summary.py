"""The audit's summary typed: every part survives a JSON round trip, ``summary.json`` of the
format before this one (with a ``calibration`` part, or older, without one) still loads, and the
command line's lines come from it."""

import json
from pathlib import Path

from mispair.audit.selfcheck import SelfCheck
from mispair.audit.summary import SUMMARY_FORMAT, AuditSummary, CalibrationPart, Detection

METRICS = {f"{d}_r{k}": 10.0 for d in ("i2t", "t2i") for k in (1, 5, 10)} | {"rsum": 60.0}
BEFORE = {  # summary.json as audits wrote it before the format was versioned (format 1)
    "collection": "/data/icons", "collection_name": "icons", "created": "2026-11-01 10:00 UTC",
    "recipe": "holdout", "run": "/out/run", "pairs": 10, "pairs_scored": 10,
    "pairs_by_split": {"train": 8, "test": 2}, "images": 9, "estimated_mismatched_share": 0.2,
    "estimated_mismatched_share_interval": [0.1, 0.3], "suspected": 2, "threshold": 0.61,
    "division": {"scores": "out_of_fold"}, "retrieval": {"test": METRICS, "clean_run_test": None},
    "truth": "the planted mismatches", "planted": 0.1,
    "self_check": {"measured_auc": 0.9, "originals_mismatched_share": 0.05, "estimated_auc": 0.92,
                   "planted": 1, "originals": 9, "share_upper_bound": 0.2, "consistent": True},
    "detection": {"auc": 0.9, "average_precision": 0.8, "precision": 0.5, "recall": 1.0,
                  "kept_precision": 1.0, "kept_recall": 0.9, "suspected": 2, "mismatched": 1, "pairs": 10},
    "files": ["summary.json", "pairs.csv"],
    "calibration": {"method": "decoys", "decoys": 40, "level": 0.95, "lambda": 0.5,
                    "separation_auc": 0.93, "fdr": 0.1, "estimated_false_drop_share": 0.08,
                    "estimated_kept_mismatched_share": 0.02, "note": "fine"},
    "pairs_read": 11, "pairs_refused": 1, "split_note": None, "audit_id": "0123456789abcdef",
    "image_root": "/data/icons", "pictures": None,
    "duplicates": {"method": "cosine", "threshold": 0.98, "images_with_near_duplicate": 2,
                   "pairs_with_near_duplicate_image": 2, "pairs_with_caption_on_other_images": 0, "leaks": 0},
    "map": "pca",
    "raw_score": {"column": "raw_similarity", "detection": {"auc": 0.7, "average_precision": 0.4}},
    "seconds": 12.5, "timings": {"reading": 1.0, "total": 12.5},
}  # fmt: skip


def test_todays_summary_loads_typed_and_writes_back_what_it_read_with_its_format():
    summary = AuditSummary.from_dict(json.loads(json.dumps(BEFORE)))
    assert summary.threshold == 0.61 and summary.scored_by == "out_of_fold"
    assert summary.detection == Detection(0.9, 0.8, 0.5, 1.0, 1.0, 0.9, 2, 1, 10)
    assert isinstance(summary.self_check, SelfCheck) and summary.self_check.consistent
    assert (
        summary.calibration == CalibrationPart("decoys", "fine", 40, 0.95, 0.5, 0.93, 0.1, 0.08, 0.02)
        and summary.calibration.calibrated
    )
    assert summary.duplicates.images_with_near_duplicate == 2 and summary.raw_score.auc == 0.7
    written = summary.to_dict()
    assert written == {**BEFORE, "format": SUMMARY_FORMAT}
    assert list(written)[: len(BEFORE)] == list(BEFORE)  # the same order of fields
    assert AuditSummary.from_dict(json.loads(json.dumps(written))) == summary


def test_a_summary_from_before_the_calibration_loads_without_one():
    older = {k: v for k, v in BEFORE.items() if k not in ("calibration", "raw_score", "timings")}
    older["detection"] = {
        k: BEFORE["detection"][k] for k in ("auc", "average_precision", "precision", "recall")
    }
    summary = AuditSummary.from_dict(older)
    assert summary.calibration is None and summary.detection.kept_precision is None
    lines = "\n".join(summary.lines(Path("out")))
    assert "estimated mismatched share 20.0% (10.0–30.0%)" in lines and "unsuspected" not in lines
    assert summary.to_dict()["calibration"] is None


def test_the_lines_say_the_calibrated_share_and_where_the_files_are():
    lines = AuditSummary.from_dict(BEFORE).lines(Path("out"))
    # the rows given (11), not only those read (10): the refused one is counted where it is said
    start = "audited 10 of 11 rows of icons (8 train, 2 test; 1 refused, refused.csv): about 20% of the pairs"
    assert lines[0].startswith(start)
    alone = AuditSummary.from_dict({**BEFORE, "pairs_read": 10, "pairs_refused": 0}).lines(Path("out"))
    assert alone[0].startswith("audited 10 of 10 pairs of icons (8 train, 2 test): about 20% of the pairs")
    assert lines[1] == "trust: fine (40 decoy pairs)"
    assert any("refused 1 of 11 rows" in line for line in lines)
    assert lines[-1].startswith("wrote out/report.html")


def test_the_fields_read_by_name_are_the_json_fields():
    summary = AuditSummary.from_dict(BEFORE)
    assert summary["detection"]["auc"] == 0.9 and summary.get("warnings") is None


def _with_check(**check) -> AuditSummary:
    before = json.loads(json.dumps(BEFORE))
    before["self_check"] |= check
    return AuditSummary.from_dict(before)


def test_the_planted_swaps_check_of_the_decoys_reads_by_its_binomial_test():
    """Within chance of a decoy's rate (p ≥ 0.05) the decoys hold; below it, the side tells
    whether the share is understated (the swaps score above the decoys) or overstated; without
    decoys, no line; a summary of the format before this field loads without it."""
    lines = {
        (ratio, p): "\n".join(
            _with_check(planted_like_decoys=ratio, planted_like_decoys_p=p).lines(Path("/out"))
        )
        for ratio, p in ((0.7, 0.38), (0.4, 0.01), (1.8, 0.01))
    }
    assert "within chance" in lines[(0.7, 0.38)] and "binomial p 0.38" in lines[(0.7, 0.38)]
    assert "share is likely understated" in lines[(0.4, 0.01)]
    assert "share is likely overstated" in lines[(1.8, 0.01)]
    assert "self-check of the decoys" not in "\n".join(
        AuditSummary.from_dict(json.loads(json.dumps(BEFORE))).lines(Path("/out"))
    )
    assert AuditSummary.from_dict(json.loads(json.dumps(BEFORE))).self_check.planted_like_decoys is None


def test_with_nothing_suspected_the_headline_states_no_drop_error_rates():
    before = json.loads(json.dumps(BEFORE)) | {"suspected": 0}
    line = AuditSummary.from_dict(before).lines(Path("out"))[0]
    assert line.endswith("none suspected (--fdr 0.1)") and "false-discovery rate of" not in line
    assert (
        "2 suspected at an estimated false-discovery rate of 8%"
        in AuditSummary.from_dict(BEFORE).lines(Path("out"))[0]
    )
