"""How well and how fast ``mispair audit`` finds planted mismatches, beside a clean-trained reference.

For each dataset and seed: ``mispair audit`` with ``--plant RATE --seed SEED`` (the default run),
its detection AUC against the planted pairs, the clean-trained reference detector of the
benchmark tables for the same noise
(``benchmarks/results/pretrained/<dataset>_clean-reference_n<rate>_s<seed>.json``: out-of-fold
scorers trained on the truly clean pairs only; not a bound), how often its suggestions hold the
true caption and image of a planted swap (beside the model's R@3 on the same images, their bound), and the
audit's wall time. A finished audit in
``--runs`` is reused (delete the folder to time it again).

    python benchmarks/audit_quality.py --datasets tuxpaint openclipart --seeds 0 1 2 --plant 0.4

``--user-collection``: the audit as a user meets it. Tux Paint's 950 stamp pictures are copied into
a folder with a ``captions.csv`` (``image,caption``, no split column) in which ``--dirty`` of the
captions were already swapped between pictures (the collection's own mismatches, recorded only
here); ``mispair audit FOLDER --plant RATE`` then plants more and checks itself. Printed per seed:
the share of rows scored (every one), the self-check's estimated AUC beside the true AUC on all
mismatched pairs (the collection's own and the planted), the AUC measured on the planted swaps
alone, and the estimated mismatched share (with its interval) beside the truth.

    python benchmarks/audit_quality.py --user-collection --dirty 0.25 --plant 0.1 --seeds 0 1 2

``--embeddings``: the built-in backbone's outputs given as a table's embedding columns, audited
beside the built-in audit. Tux Paint's image features mean-pooled (what the default run reads of
them) and MiniLM's token states mean-pooled (as the run reads them: float16) are written as the
``img_emb`` and ``txt_emb`` columns of a Parquet (with the same image ids, pair ids and splits);
the same planted swaps are found in both with the same detection when the embedding path is
equivalent to the built-in one.

    python benchmarks/audit_quality.py --embeddings --seeds 0 1 2 --plant 0.4
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from mispair.audit import audit_collection
from mispair.audit.result import AuditResult
from mispair.config import DataConfig

RESULTS = Path(__file__).parent / "results"


def clean_reference(dataset: str, rate: float, seed: int) -> float | None:
    path = RESULTS / "pretrained" / f"{dataset}_clean-reference_n{rate:g}_s{seed}.json"
    return json.loads(path.read_text())["auc"] if path.is_file() else None


def suggestion_quality(
    result: AuditResult, data: str, out: Path, plant: float, seed: int
) -> dict[str, float]:
    """How often the audit's suggestions undo a planted swap, over the swapped pairs: ``caption``,
    the share whose image's true caption is among its 3 suggested captions; ``image``, the share
    whose caption's true image is among its 3 suggested images; ``bound``, the model's R@3 on
    the same images (its true caption among its 3 most similar captions of the whole collection):
    the bound of suggestions drawn from every caption."""
    from mispair.audit.collection import audit_config
    from mispair.audit.pair_table import audited_pairs
    from mispair.encoding import cross_similarities
    from mispair.engine.trained import TrainedRun

    pairs = result.pairs
    swapped = pairs[pairs["truly_mismatched"].astype(bool)]
    true_captions = pairs.groupby("true_image_id")["caption"].agg(set)
    suggested = [f"suggested_caption_{n}" for n in (1, 2, 3)]
    caption_hit = [
        bool(set(row[suggested]) & true_captions.get(row["image_id"], set())) for _, row in swapped.iterrows()
    ]
    images = swapped[[f"suggested_image_id_{n}" for n in (1, 2, 3)]].to_numpy()
    image_hit = [true in row for true, row in zip(swapped["true_image_id"], images)]
    run = TrainedRun.best_of(audit_config(Path(data), out, plant=plant, seed=seed))
    audited = audited_pairs(run)
    place = {image_id: i for i, image_id in enumerate(audited.image_ids)}
    rows = np.array([place[i] for i in swapped["image_id"]])
    sims = cross_similarities(run.models, audited.pairs, rows, np.arange(len(audited.pairs))).numpy()
    top = np.argsort(-sims, axis=1, kind="stable")[:, :3]
    bound = (audited.true_image[top] == rows[:, None]).any(axis=1)
    return {
        "caption": float(np.mean(caption_hit)),
        "image": float(np.mean(image_hit)),
        "bound": float(bound.mean()),
        "swapped": len(swapped),
    }


def user_collection(folder: Path, dirty: float, seed: int) -> dict[str, str]:
    """Tux Paint's pictures and captions as a user's folder (``images/`` + ``captions.csv``, no
    split column) with ``dirty`` of the captions swapped between pictures; returns each row's
    (pair id = its row number) true picture."""
    import csv
    import shutil

    from mispair.data.readers.precomputed import PICTURE_DIRS

    precomp, stamps = Path("data/tuxpaint_precomp"), PICTURE_DIRS[0]
    ids, captions = [], []
    for split in ("train", "dev", "test"):
        ids += (precomp / f"{split}_ids.txt").read_text(encoding="utf-8").splitlines()
        captions += (precomp / f"{split}_caps.txt").read_text(encoding="utf-8").splitlines()
    rng = np.random.default_rng(1000 + seed)
    shown = np.arange(len(ids))
    swapped = np.flatnonzero(rng.random(len(ids)) < dirty)
    shown[swapped] = swapped[np.roll(rng.permutation(len(swapped)), 1)]  # a cycle: none stays put
    (folder / "images").mkdir(parents=True, exist_ok=True)
    for name in ids:
        target = folder / "images" / name.replace("/", "__")
        if not target.is_file():
            shutil.copyfile(stamps / name, target)
    with open(folder / "captions.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["image", "caption"])
        for row, caption in enumerate(captions):
            writer.writerow([f"images/{ids[shown[row]].replace('/', '__')}", caption])
    return {str(row): f"images/{name.replace('/', '__')}" for row, name in enumerate(ids)}


def audit_user_collection(args: argparse.Namespace) -> None:
    from sklearn.metrics import roc_auc_score

    lines = [
        f"# mispair audit of a dirty user collection (Tux Paint, {args.dirty:g} swapped, no split "
        f"column) with --plant {args.plant}: the self-check against the truth",
        "",
        "| seed | rows | scored | true AUC | self-check estimate | estimate − true | "
        "measured on planted | originals mismatched: true | self-check | "
        "all pairs mismatched: true | mixture (95% interval) | audit seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for seed in args.seeds:
        folder = Path(args.runs) / f"user_tuxpaint_d{args.dirty:g}_s{seed}"
        true_image = user_collection(folder / "collection", args.dirty, seed)
        started = time.time()
        result = audit_collection(
            folder / "collection",
            folder / "audit",
            plant=args.plant,
            seed=seed,
            overrides=args.set,
            progress=False,
            log=lambda _: None,
        )
        seconds, summary, pairs = time.time() - started, result.summary, result.pairs
        truth = np.array([true_image[p] != image for p, image in zip(pairs["pair_id"], pairs["image_id"])])
        planted = pairs["truly_mismatched"].to_numpy(dtype=bool)  # the audit knows only its own swaps
        auc = roc_auc_score(truth, -pairs["held_out_score"].to_numpy())
        check, (low, high) = summary["self_check"], summary["estimated_mismatched_share_interval"]
        lines.append(
            f"| {seed} | {len(true_image)} | {summary['pairs_scored'] / len(true_image):.0%} | "
            f"{auc:.3f} | {check['estimated_auc']:.3f} | {check['estimated_auc'] - auc:+.3f} | "
            f"{check['measured_auc']:.3f} | {truth[~planted].mean():.3f} | "
            f"{check['originals_mismatched_share']:.3f} | {truth.mean():.3f} | "
            f"{summary['estimated_mismatched_share']:.3f} ({low:.3f}–{high:.3f}) | "
            f"{seconds:.0f} |"
        )
        print(lines[-1], flush=True)
    lines += [
        "",
        "Rows: the rows of captions.csv; scored: the share of them in pairs.csv with a held-out "
        "score. True AUC: the ranking's ROC-AUC on every truly mismatched pair (the collection's "
        "own swaps and the planted ones) against the truly matched pairs. Originals mismatched: "
        "the share of the collection's own pairs (all but the planted) that are swapped, and the "
        "self-check's estimate of it from the planted swaps (Storey's estimator); all pairs: the "
        "share over every pair, and the two-component mixture's estimate (the summary's "
        "estimated_mismatched_share).",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


def embedding_table(path: Path, precomp: Path = Path("data/tuxpaint_precomp")) -> Path:
    """Tux Paint as a Parquet with the built-in backbone's vectors as embedding columns (written
    once): ``pair_id``, ``image``, ``caption``, ``split``, ``img_emb [1280]``, ``txt_emb [384]``."""
    if path.is_file():
        return path
    import pandas as pd
    import torch

    from mispair.data.batching import pad_tokens
    from mispair.data.loading import load_split
    from mispair.data.tokenizers import MiniLMTokenizer
    from mispair.nn.text.minilm import frozen_minilm, minilm_states

    frames, tokenizer = [], MiniLMTokenizer()
    for split in ("train", "dev", "test"):
        pairs = load_split(DataConfig(source="precomp", root=str(precomp)), split).with_mean_fragment()
        texts = []
        for start in range(0, pairs.n_captions, 128):
            tokens, lengths = pad_tokens([tokenizer.encode(c) for c in pairs.captions[start : start + 128]])
            with torch.no_grad():
                states = minilm_states(frozen_minilm(), tokens, lengths).half().float()
            mask = (torch.arange(tokens.shape[1])[None, :] < lengths[:, None]).float()[..., None]
            texts.append(((states * mask).sum(1) / mask.sum(1)).numpy())
        frames.append(
            pd.DataFrame(
                {
                    "pair_id": [f"{split}/{k}" for k in range(pairs.n_captions)],
                    "image": [pairs.image_ids[i] for i in pairs.image_of_caption],
                    "caption": pairs.captions,
                    "split": split,
                    "img_emb": list(pairs.images[pairs.image_of_caption, 0]),
                    "txt_emb": list(np.concatenate(texts)),
                }
            )
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.concat(frames, ignore_index=True).to_parquet(path, index=False)
    return path


def audit_embeddings(args: argparse.Namespace) -> None:
    table = embedding_table(Path(args.runs) / "tuxpaint_embeddings.parquet")
    columns = ["data.image_embedding_column=img_emb", "data.text_embedding_column=txt_emb"]
    lines = [
        f"# mispair audit of Tux Paint with --plant {args.plant}: the built-in backbone beside its own "
        "outputs given as embedding columns",
        "",
        "| seed | pairs | AUC built-in | AUC embeddings | AP built-in | AP embeddings | largest score "
        "difference | seconds built-in | seconds embeddings |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for seed in args.seeds:
        runs, seconds, scores = {}, {}, {}
        for name, data, overrides in (
            ("builtin", Path("data/tuxpaint_precomp"), []),
            ("embeddings", table, columns),
        ):
            started = time.time()
            result = audit_collection(
                data,
                Path(args.runs) / f"tuxpaint_{name}_p{args.plant:g}_s{seed}",
                overrides=overrides,
                plant=args.plant,
                seed=seed,
                progress=False,
                log=lambda _: None,
            )
            seconds[name], runs[name] = time.time() - started, result.summary
            scores[name] = result.pairs.set_index("pair_id")["held_out_score"]
        gap = (scores["builtin"] - scores["embeddings"][scores["builtin"].index]).abs().max()
        b, e = runs["builtin"]["detection"], runs["embeddings"]["detection"]
        lines.append(
            f"| {seed} | {runs['builtin']['pairs']} | {b['auc']:.3f} | {e['auc']:.3f} | "
            f"{b['average_precision']:.3f} | {e['average_precision']:.3f} | {gap:.1e} | "
            f"{seconds['builtin']:.0f} | {seconds['embeddings']:.0f} |"
        )
        print(lines[-1], flush=True)
    lines += [
        "",
        "Largest score difference: the largest difference of a pair's held-out score between "
        "the two audits. Seconds: wall time of each audit on this machine's 2 CPU cores (shared "
        "with other jobs); 0–60 s when a finished run was reused.",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--user-collection", action="store_true", help="audit Tux Paint as a dirty user folder (see above)"
    )
    parser.add_argument(
        "--embeddings",
        action="store_true",
        help="audit Tux Paint's built-in features given as embedding columns (see above)",
    )
    parser.add_argument("--dirty", type=float, default=0.25, help="the user collection's own swapped share")
    parser.add_argument("--datasets", nargs="+", default=["tuxpaint"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--plant", type=float, default=0.4)
    parser.add_argument("--runs", default="runs/audit_quality")
    parser.add_argument("--out", default=str(RESULTS / "audit_quality.md"))
    parser.add_argument("--set", nargs="*", default=[], help="key=value overrides of every audit's run")
    args = parser.parse_args()
    if args.user_collection:
        return audit_user_collection(args)
    if args.embeddings:
        return audit_embeddings(args)
    lines = [
        f"# mispair audit with --plant {args.plant}: detection against the clean-trained reference",
        "",
        f"Overrides of the audit's run: {' '.join(args.set) or 'none'}.",
        "",
        "| dataset | seed | pairs | AUC | clean reference | clean reference − AUC | average precision "
        "| precision | recall | kept precision | kept recall | estimated share | caption hit@3 | model R@3 "
        "| image hit@3 | audit seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for dataset in args.datasets:
        gaps = []
        for seed in args.seeds:
            out = Path(args.runs) / f"{dataset}_p{args.plant:g}_s{seed}"
            started, reused = time.time(), (out / "run" / "best.pt").is_file()
            result = audit_collection(
                f"data/{dataset}_precomp",
                out,
                overrides=args.set,
                plant=args.plant,
                seed=seed,
                progress=False,
                log=lambda _: None,
            )
            seconds, summary = time.time() - started, result.summary
            hits = suggestion_quality(result, f"data/{dataset}_precomp", out, args.plant, seed)
            d, top = summary["detection"], clean_reference(dataset, args.plant, seed)
            gap = "" if top is None else f"{top - d['auc']:.3f}"
            if top is not None:
                gaps.append(top - d["auc"])
            lines.append(
                f"| {dataset} | {seed} | {summary['pairs']} | {d['auc']:.3f} | "
                f"{'' if top is None else f'{top:.3f}'} | {gap} | {d['average_precision']:.3f} | "
                f"{d['precision']:.2f} | {d['recall']:.2f} | "
                f"{d['kept_precision']:.2f} | {d['kept_recall']:.2f} | "
                f"{summary['estimated_mismatched_share']:.2f} | {hits['caption']:.3f} | "
                f"{hits['bound']:.3f} | {hits['image']:.3f} | {seconds:.0f}"
                f"{' (run reused)' if reused else ''} |"
            )
            print(lines[-1], flush=True)
        if gaps:
            lines.append(f"| {dataset} | mean | | | | {np.mean(gaps):.3f} | | | | | | | | | | |")
    lines += [
        "",
        "Precision, recall: of the suspected set (mismatch probability at least the audit's "
        "threshold) against the planted swaps; kept precision: the share of the pairs left "
        "unsuspected (what a user keeps) that are truly matched; kept recall: the share of the "
        "truly matched pairs left unsuspected.",
        "",
        "Caption hit@3: the share of the planted swaps whose image's true caption is among the 3 "
        "captions the audit suggests for it (pairs.csv suggested_caption_1..3); model R@3: the "
        "same model's R@3 on the same images against every caption of the collection, the bound "
        "of suggestions drawn from all captions (the audit draws them from the suspected pairs' "
        "captions, where a swapped pair's true caption sits, so it can do better); image hit@3: "
        "the share whose caption's true image is among its 3 suggested images.",
        "",
        "Audit seconds: wall time of the whole audit (scoring, training, ranking, report) on this "
        "machine's 2 CPU cores, with other jobs on them; much less when a finished run was "
        "reused (the ranking, suggestions and report only).",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
