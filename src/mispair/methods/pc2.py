"""``pc2``: Pseudo-Classification based Pseudo-Captioning (Duan et al., ACM MM 2024).

On NCR's co-training skeleton (warm-up, per-epoch co-divide into clean/noisy pairs), PC² adds a
pseudo-classifier ``C`` over image and text embeddings and three components (Table 3):

- **P-Cls** (§4.2): on clean pairs, the image's prediction learns the text's hard pseudo-label
  (Eq. 2), with a balance term spreading the predictions over the ``K`` classes (Eq. 3);
- **P-Cap** (§4.3): each noisy image borrows the caption of the clean image of the batch whose
  pseudo-prediction is closest (Eq. 4) and trains on it with an adaptive margin (Eq. 5–6);
- **CR** (§4.4): the KL between an image's predictions of consecutive epochs (Eq. 7) is split by
  the mixture into a second clean probability, which raises the clean pairs' margin (Eq. 8–9).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mispair import division
from mispair.data.batching import Batch
from mispair.data.mapped import rows
from mispair.encoding import evaluating
from mispair.errors import ConfigError
from mispair.losses import (
    balance_loss,
    pseudo_classification_loss,
    pseudo_pair_loss,
    rectified_target,
    reduce_batch,
    soft_margin,
)
from mispair.methods.base import Update, Warmup, register_recipe
from mispair.methods.cotrain import MIXTURES, CoTraining, CoTrainingOptions, CoTrainItem
from mispair.methods.scoring import clean_probability


class PseudoClassifier(nn.Module):
    """``C``: an MLP ``d → hidden → K`` giving class logits of pooled embeddings ``[B, d]``.

    One ``C`` serves both modalities (the paper's ``C(f(I))`` and ``C(g(T))``), like the
    reference's ``Projection_Head`` (Linear, ReLU, Linear with 256 hidden units).
    """

    def __init__(self, embed_dim: int, n_classes: int = 128, hidden: int = 256) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(embed_dim, hidden), nn.ReLU(), nn.Linear(hidden, n_classes))

    def forward(self, pooled: Tensor) -> Tensor:
        return self.net(pooled)


def assign_pseudo_captions(noisy: Tensor, clean: Tensor) -> tuple[Tensor, Tensor]:
    """PC² Eq. 4: for each noisy image ``i``, ``j = argmax_b cos(noisy_i, clean_b)``.

    ``noisy [Bn, K]`` and ``clean [Bc, K]`` are pseudo-predictions (or, for the Table 3 variant
    without ``C``, image embeddings). Returns the lender index ``j`` ``[Bn]`` (long) and the
    similarity ``S^p(p_i^n, p_j^c)`` ``[Bn]``.
    """
    sims = F.normalize(noisy, dim=1) @ F.normalize(clean, dim=1).t()
    best, index = sims.max(dim=1)
    return index, best


@register_recipe
class PC2(CoTraining):
    """PC² on two co-trained models (NCR's co-divide), each with its own pseudo-classifier.

    Total loss per step (Eq. 10): ``L^c + λ^n L^n + λ^pse L^pse + λ^ent L^ent`` — the clean
    pairs' triplet loss with the rectified margin (Eq. 8–9, summed over the batch as NCR), the
    pseudo-pairs' loss (Eq. 5–6, summed; from ``unlabeled_from`` of the co-training epochs, as
    the reference's ``warmup_epoch_2 = 25`` of 50), the pseudo-classification cross-entropy
    (Eq. 2, mean) and the balance term (Eq. 3). The warm-up trains NCR's summed hinge loss plus
    P-Cls on all pairs (the reference does), so ``C`` is ready when the division starts.

    ``C`` sits on the pooled embeddings ``Fragments.pooled`` of both modalities, for every head.
    Ablations (Table 3): ``pseudo_classification``, ``pseudo_captioning``, ``rectification``
    (without it the clean margin uses ``w^c`` alone); ``caption_by="embedding"`` picks
    pseudo-captions by the cosine of pooled image embeddings (row 5, no ``C`` needed).

    Logged per epoch: the division's and the oscillation split's detection scores when the noise
    is known, and, for the *previous* epoch's steps, the mean pseudo-caption similarity and (with a
    ``category`` metadata column, e.g. Tux Paint) how often the lending image shares the noisy
    image's category.

    ``loss=infonce`` (temperature ``tau``, 0.2 by default): the warm-up's hinge becomes the plain
    InfoNCE (P-Cls unchanged), and clean pair ``i`` trains the InfoNCE weighted by the fraction of
    the full margin its rectified margin keeps, ``ℓ_i = (m^t_i − 1)/(m − 1) · InfoNCE_i`` with
    ``t_i`` the exponent of Eq. 8 (:func:`~mispair.losses.rectified_target`; m = ``curve``;
    :func:`~mispair.losses.soft_pair_loss`), averaged over the batch. The pseudo-pairs keep their
    own loss (Eq. 5–6), and the division, P-Cls and CR are unchanged.
    """

    name = "pc2"

    @dataclass
    class Options(CoTrainingOptions):
        warmup_epochs: int = 5
        n_classes: int = 128
        classifier_hidden: int = 256
        curve: float = 10.0
        lambda_n: float = 1.0
        lambda_pse: float = 1.0
        lambda_ent: float = 10.0
        pseudo_classification: bool = True
        pseudo_captioning: bool = True
        rectification: bool = True
        caption_by: Literal["prediction", "embedding"] = "prediction"
        balance: Literal["mean", "sample"] = "mean"
        warmup_classification: bool = True

        def __post_init__(self) -> None:
            if self.n_classes < 2:
                raise ConfigError(f"method.n_classes: at least 2, got {self.n_classes}")
            if not self.pseudo_classification:
                if self.rectification:
                    raise ConfigError("method.rectification needs method.pseudo_classification")
                if self.pseudo_captioning and self.caption_by == "prediction":
                    raise ConfigError(
                        "method.pseudo_captioning by prediction needs "
                        "method.pseudo_classification (or caption_by=embedding)"
                    )

    def __init__(self, models, options, context) -> None:
        super().__init__(models, options, context)
        with torch.no_grad():  # the pooled embedding size, whatever the encoder
            probe = context.train.batch(np.arange(1)).images.to(context.device)
            embed_dim = models[0].encode_images(probe).pooled.shape[1]
        self.classifiers = nn.ModuleList(
            PseudoClassifier(embed_dim, options.n_classes, options.classifier_hidden) for _ in models
        ).to(context.device)
        self.previous_predictions: np.ndarray | None = None  # [n_models, n_images, K]
        self.oscillation_prob: np.ndarray | None = None  # [n_models, n_pairs]
        self._caption_stats = np.zeros((len(models), 3))  # per model: lent, same category, Σ sim

    # ---------------------------------------------------------------- parameters and state
    def param_groups(self, lr: float) -> list[dict[str, Any]]:
        groups = super().param_groups(lr)
        groups[0]["params"] = groups[0]["params"] + list(self.classifiers.parameters())
        return groups

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["classifiers"] = self.classifiers.state_dict()
        if self.previous_predictions is not None:
            state["previous_predictions"] = torch.from_numpy(self.previous_predictions)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "classifiers" in state:
            self.classifiers.load_state_dict(state["classifiers"])
        previous = state.get("previous_predictions")
        self.previous_predictions = None if previous is None else np.asarray(previous)

    # ---------------------------------------------------------------- division
    @torch.no_grad()
    def image_predictions(self) -> np.ndarray:
        """``[n_models, n_images, K]`` pseudo-predictions ``softmax(C(f(I)))`` of every training
        image, in eval mode (a pair's prediction is its image's: ``C`` sees only the image)."""
        ctx, images = self.context, self.context.train.pairs.images
        out = np.zeros((len(self.models), len(images), self.options.n_classes), dtype=np.float32)
        for k, (model, classifier) in enumerate(zip(self.models, self.classifiers)):
            with evaluating(model):
                for start in range(0, len(images), ctx.eval_batch_size):
                    chunk = rows(images, slice(start, start + ctx.eval_batch_size), np.float32)
                    pooled = model.encode_images(torch.from_numpy(chunk).to(ctx.device)).pooled
                    out[k, start : start + len(chunk)] = classifier(pooled).softmax(dim=1).cpu().numpy()
        return out

    def begin_epoch(self, epoch: int) -> dict[str, float]:
        """Co-divide on losses (NCR) and, with CR, on the prediction oscillation (Eq. 7)."""
        values = self._caption_log()
        opts = self.options
        predictions = None
        if opts.rectification and epoch >= opts.warmup_epochs - 1:
            predictions = self.image_predictions()
        if epoch < opts.warmup_epochs:
            self.previous_predictions = predictions
            return values
        values.update(super().begin_epoch(epoch))
        self.oscillation_prob = None
        if predictions is not None and self.previous_predictions is not None:
            image_of_pair = self.context.train.image_of_caption
            scores = [
                division.oscillation_scores(prev, now)[image_of_pair]
                for prev, now in zip(self.previous_predictions, predictions)
            ]
            self.oscillation_prob = clean_probability(np.stack(scores), MIXTURES[opts.mixture], self.context)
            values.update(self.detection_log(self.oscillation_prob, prefix="oscillation"))
        self.previous_predictions = predictions
        return values

    # ---------------------------------------------------------------- steps
    def train_step(self, item: Warmup | CoTrainItem, epoch: int) -> Update:
        k = item.model
        if isinstance(item, Warmup):
            terms = self.warmup_terms(k, item.batch)
        else:
            terms = self.cotrain_loss(k, item.labeled, item.unlabeled, epoch)
        return Update({f"{name}_{k}": value for name, value in terms.items()})

    def _encode(self, k: int, batch: Batch):
        model = self.models[k]
        images = model.encode_images(batch.images)
        texts = model.encode_texts(batch.tokens, batch.lengths)
        return images, texts, model.similarity(images, texts)

    def _classification_terms(self, k: int, images, texts) -> dict[str, Tensor]:
        """``λ^pse L^pse`` (Eq. 2) and ``λ^ent L^ent`` (Eq. 3) of a batch of (clean) pairs."""
        opts, classifier = self.options, self.classifiers[k]
        if not opts.pseudo_classification:
            return {}
        image_logits, text_logits = classifier(images.pooled), classifier(texts.pooled)
        classification = reduce_batch(pseudo_classification_loss(image_logits, text_logits), "mean")
        return {
            "pseudo_cls": opts.lambda_pse * classification,
            "balance": opts.lambda_ent * balance_loss(image_logits.softmax(dim=1), opts.balance),
        }

    def warmup_terms(self, k: int, batch: Batch) -> dict[str, Tensor]:
        """NCR's warm-up (hinge summed over negatives, all pairs) plus, with
        ``warmup_classification`` (the reference), P-Cls on all pairs; the paper defines P-Cls on
        the clean split only (§4.2) and warms up as NCR does (``warmup_classification=false``)."""
        images, texts, sims = self._encode(k, batch)
        terms = {"warmup": self.warmup_pair_loss(sims)}
        if not self.options.warmup_classification:
            return terms
        return terms | self._classification_terms(k, images, texts)

    def clean_margins(self, k: int, batch: Batch) -> Tensor:
        """``α^c`` of Eq. 8 for a labeled batch of model ``k`` (both probabilities co-divided)."""
        opts = self.options
        target = self.labeled_prob(k, batch)
        if opts.rectification and self.oscillation_prob is not None:
            index = batch.index.cpu().numpy()
            w_o = torch.as_tensor(
                self.oscillation_prob[1 - k][index], dtype=target.dtype, device=target.device
            )
            target = rectified_target(target, w_o, opts.p_threshold)
        return soft_margin(target, opts.margin, opts.curve)

    def cotrain_loss(self, k: int, labeled: Batch, unlabeled: Batch | None, epoch: int) -> dict[str, Tensor]:
        images, texts, sims = self._encode(k, labeled)
        clean = self.pair_loss(sims, self.clean_margins(k, labeled))
        terms = {"clean": self.reduce(clean)}  # the triplet summed over the batch, as NCR
        terms |= self._classification_terms(k, images, texts)
        opts = self.options
        if (
            opts.pseudo_captioning
            and unlabeled is not None
            and len(unlabeled) > 1
            and self.use_unlabeled(epoch)
        ):
            loss = self.pseudo_caption_loss(k, images, texts, labeled, unlabeled)
            terms["pseudo_cap"] = opts.lambda_n * loss
        return terms

    def pseudo_caption_loss(self, k: int, images, texts, labeled: Batch, noisy: Batch) -> Tensor:
        """``L^n`` (Eq. 6) of the noisy batch, captions lent by the clean batch (Eq. 4–5)."""
        model, opts = self.models[k], self.options
        noisy_images = model.encode_images(noisy.images)
        with torch.no_grad():
            noisy_key, clean_key = noisy_images.pooled, images.pooled
            if opts.caption_by == "prediction":
                classifier = self.classifiers[k]
                noisy_key = classifier(noisy_key).softmax(dim=1)
                clean_key = classifier(clean_key).softmax(dim=1)
            lender, similarity = assign_pseudo_captions(noisy_key, clean_key)
        self._record_captions(k, noisy.image_index, labeled.image_index[lender], similarity)
        margins = soft_margin(similarity.clamp(min=0), opts.margin, opts.curve)
        sims = model.similarity(noisy_images, texts[lender])
        return reduce_batch(pseudo_pair_loss(sims, lender, margins), "sum")

    # ---------------------------------------------------------------- pseudo-caption quality log
    def _record_captions(self, k: int, noisy_images: Tensor, lenders: Tensor, similarity: Tensor) -> None:
        stats = self._caption_stats[k]
        stats[0] += len(lenders)
        stats[2] += float(similarity.sum())
        category = self.context.train.pairs.image_meta.get("category")
        if category is not None:
            pairs = zip(noisy_images.tolist(), lenders.tolist())
            stats[1] += sum(category[a] == category[b] for a, b in pairs)

    def _caption_log(self) -> dict[str, float]:
        """The pseudo-captions lent since the last call (the previous epoch's steps)."""
        values = {}
        has_category = "category" in self.context.train.pairs.image_meta
        for k, (lent, same, similarity) in enumerate(self._caption_stats):
            if lent:
                values[f"pseudo_caption/{k}/similarity"] = similarity / lent
                if has_category:
                    values[f"pseudo_caption/{k}/category_match"] = same / lent
        self._caption_stats[:] = 0
        return values
