"""A tiny sentence-transformers directory (scoring/semantic/tiny.py's model, saved), built once per session: what
embed.py's tests load in place of a real model."""
from __future__ import annotations

from pathlib import Path

import pytest

SENTENCES = [
    "Tom has 3 apples and gets 5 more. How many apples does Tom have now?",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.",
    "Write a function that returns the number of vowels in a string.",
    "The quick brown fox jumps over the lazy dog while the cat sleeps.",
    "Weng earns 12 dollars an hour for babysitting; yesterday she did 50 minutes.",
    "0 1 2 3 4 5 6 7 8 9 , . ? ! ; : ( ) -",
]


def save_sentence_model(tiny, directory: Path) -> Path:
    tiny.model.save_pretrained(directory)
    tiny.tokenizer.save_pretrained(directory)
    for rel, text in tiny.files.items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).write_text(text)
    return directory


@pytest.fixture(scope="session")
def tiny_sentence_dir(tmp_path_factory) -> Path:
    """A mean-pooling, normalising tiny model's directory."""
    from scoring.semantic.tiny import tiny_sentence_model

    return save_sentence_model(tiny_sentence_model(SENTENCES), tmp_path_factory.mktemp("tiny-st"))
