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
