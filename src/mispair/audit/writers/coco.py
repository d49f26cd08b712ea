"""COCO captions JSON (or the Karpathy split JSON) written back as JSON of the same kind.

COCO: the dropped annotations removed, a replaced caption written into its annotation's
``caption``, the images left without any annotation removed, every other key (``info``,
``licenses``, ``categories``, an annotation's or an image's other fields) as it was. Karpathy: the
dropped sentences removed, a replaced one's ``raw`` (and ``tokens``, lower-cased words) set, the
images left without a sentence removed. The kept pictures are linked beside the JSON at their
``file_name`` (Karpathy: ``filepath/filename``), so the output folder is a collection as it is.
Pair ids are the reader's: the annotation ``id`` (else its position), the ``sentid``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from mispair.audit.writers.base import Decided, WriteRequest, Written, new_file, own_name
from mispair.data.readers.coco import load_document
from mispair.errors import DataError


def write_coco(request: WriteRequest, folder: Path) -> Written:
    """The captions JSON with the decisions applied, as ``folder/<its name>``, and its pictures."""
    source = request.collection
    own_name(source)
    document = load_document(source)  # as the reader reads it: bounded, checked
    if "annotations" in document:
        written = _coco(document, request.decided)
    else:
        written = _karpathy(document, request.decided)
    with new_file(folder / source.name, "w", encoding="utf-8") as out:
        json.dump(document, out, ensure_ascii=False)
    written.files.append(source.name)
    counts = request.link_pictures(folder, written.files)
    written.linked, written.copied = counts.get("linked", 0), counts.get("copied", 0)
    return written


def _coco(document: dict, decided: Decided) -> Written:
    annotations = document.get("annotations")
    if not isinstance(annotations, list):
        raise DataError("COCO JSON without an 'annotations' list")
    written, kept = Written(read=len(annotations)), []
    for n, annotation in enumerate(annotations):
        if not isinstance(annotation, dict):
            continue
        pair_id = str(annotation.get("id", n))
        if not decided.keeps(pair_id):
            continue
        new = decided.caption(pair_id)
        if new is not None:
            annotation = {**annotation, "caption": new}
            written.replaced += 1
        kept.append(annotation)
    described = {str(a.get("image_id")) for a in kept}
    document["annotations"] = kept
    document["images"] = [
        i for i in document["images"] if isinstance(i, dict) and str(i.get("id")) in described
    ]
    written.kept = len(kept)
    return written


def _karpathy(document: dict, decided: Decided) -> Written:
    written, images, count = Written(), [], 0
    for image in document["images"]:
        if not isinstance(image, dict):
            continue
        sentences = []
        for sentence in image.get("sentences") or []:
            if not isinstance(sentence, dict):
                continue
            pair_id = str(sentence.get("sentid", count))
            count += 1
            if not decided.keeps(pair_id):
                continue
            new = decided.caption(pair_id)
            if new is not None:
                sentence = {**sentence, "raw": new}
                if "tokens" in sentence:
                    sentence["tokens"] = re.findall(r"\w+", new.lower())
                written.replaced += 1
            sentences.append(sentence)
        if sentences:
            images.append({**image, "sentences": sentences})
        written.kept += len(sentences)
    written.read = count
    document["images"] = images
    return written
