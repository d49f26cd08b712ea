"""mispair's version: one place, on the ground floor, for what records it (run inputs, index manifests)."""

__version__ = "0.1.0"
