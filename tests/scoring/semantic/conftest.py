"""A tiny sentence-transformers directory (tests/sentence_models.py), built once per session: what embed.py's tests
load in place of a real model."""
from __future__ import annotations

from pathlib import Path

import pytest

from sentence_models import build_sentence_model


@pytest.fixture(scope="session")
def tiny_sentence_dir(tmp_path_factory) -> Path:
    """A mean-pooling, normalising tiny model's directory."""
    return build_sentence_model(tmp_path_factory.mktemp("tiny-st"))
