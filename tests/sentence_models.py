"""Tiny sentence-transformers directories for tests (scoring/semantic/tiny.py's random model, saved): what the
embedder's unit tests and `overlap --semantic`'s end-to-end tests load in place of a real model. A helper module,
not a conftest, so that tests/scoring/semantic and tests/jobs build the same model the same way."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

SENTENCES = [
    "Tom has 3 apples and gets 5 more. How many apples does Tom have now?",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.",
    "Write a function that returns the number of vowels in a string.",
    "The quick brown fox jumps over the lazy dog while the cat sleeps.",
    "Weng earns 12 dollars an hour for babysitting; yesterday she did 50 minutes.",
    "0 1 2 3 4 5 6 7 8 9 , . ? ! ; : ( ) -",
]


def save_sentence_model(tiny, directory: Path) -> Path:
    """A TinySentenceModel's model, tokenizer and module files written into `directory`."""
    tiny.model.save_pretrained(directory)
    tiny.tokenizer.save_pretrained(directory)
    for rel, text in tiny.files.items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).write_text(text)
    return directory


def build_sentence_model(directory: Path, sentences: Sequence[str] = SENTENCES, **kwargs) -> Path:
    """A mean-pooling, normalising tiny model trained (its tokenizer) on `sentences`, saved into `directory`."""
    from scoring.semantic.tiny import tiny_sentence_model

    return save_sentence_model(tiny_sentence_model(sentences, **kwargs), Path(directory))
