"""Overrides shared by the tests that train a tiny run on synthetic pairs from the command line."""

TINY_SYNTHETIC_TRAIN = [
    "data.source=synthetic",
    "data.synthetic_images=40",
    "model.embed_dim=16",
    "model.word_dim=8",
    "model.text_encoder=bigru",
    "train.epochs=1",
    "train.batch_size=20",
    "train.threads=1",
]
"""One epoch of a 16-dimensional BiGRU model on 40 synthetic images: a run folder in seconds."""

TINY_AUDIT_SCHEDULE = [
    "model.embed_dim=32",
    "train.epochs=1",
    "train.batch_size=8",
    "train.lr_decay_epochs=[]",
    "train.threads=1",
    "division.folds=2",
    "division.epochs=2",
    "division.rounds=1",
    "division.repeats=1",
]
"""The audit's run cut to one epoch and two folds scored once: a whole audit of a small
collection in seconds (the encoders stay the collection's own)."""

TINY_FORM_AUDIT = [
    "model.text_encoder=bigru",
    "model.image_pooling=features",
    "model.word_dim=16",
    *TINY_AUDIT_SCHEDULE,
]
"""The tiny audit of the readers' small collection (``tests/data/readers_forms.py``) in any of its
forms: the ``form_audit`` fixture's (``tests/conftest.py``)."""
