"""A tiny sentence-transformers model, built in memory in a second: a 2-layer BERT with random weights (seeded), a
WordPiece tokenizer whose vocabulary is read off the given sentences (the same in every process), and the
sentence-transformers module files that embed.py reads.
Its embeddings mean nothing; it is what tests and offline demos load through the same path as a real model
(all-MiniLM-L6-v2) without a download. Nothing is written here: the caller saves the model and tokenizer
(`save_pretrained`) and writes `files` (relative path -> JSON text) into the same directory.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@dataclass
class TinySentenceModel:
    model: object  # transformers.BertModel
    tokenizer: object  # transformers.BertTokenizerFast
    files: dict[str, str]  # modules.json, 1_Pooling/config.json, sentence_bert_config.json


def module_files(dim: int, pooling: str = "mean", normalize: bool = True, max_seq_length: int = 128) -> dict[str, str]:
    """The sentence-transformers files of a Transformer -> Pooling (-> Normalize) model, as all-MiniLM-L6-v2 has."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    modes = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens", "lasttoken")
    chosen = {"mean": "mean_tokens", "cls": "cls_token"}[pooling]
    pool = {"word_embedding_dimension": dim} | {f"pooling_mode_{m}": m == chosen for m in modes}
    return {"modules.json": json.dumps(modules, indent=2), "1_Pooling/config.json": json.dumps(pool, indent=2),
            "sentence_bert_config.json": json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False})}


def wordpiece_vocab(sentences: Sequence[str], size: int) -> dict[str, int]:
    """A WordPiece vocabulary that is a function of `sentences` alone: the special tokens, every character (alone
    and as a "##" continuation), then whole words by falling count, ties in alphabetical order, up to `size`.
    Not `train_from_iterator`: its trainer breaks ties in hash-map order, so the same sentences gave another
    vocabulary (hence other weights and other cosines) from one process to the next, and a test that read a
    ranking off this model passed here and failed in CI."""
    from collections import Counter

    from tokenizers import BertWordPieceTokenizer

    base = BertWordPieceTokenizer(lowercase=True)._tokenizer  # its normaliser and pre-tokeniser, nothing trained
    words = Counter(w for s in sentences
                    for w, _ in base.pre_tokenizer.pre_tokenize_str(base.normalizer.normalize_str(s)))
    chars = sorted({c for w in words for c in w})
    tokens = list(dict.fromkeys([*SPECIAL, *chars, *(f"##{c}" for c in chars)]))
    known = set(tokens)
    tokens += [w for w, _ in sorted(words.items(), key=lambda kv: (-kv[1], kv[0])) if w not in known]
    return {t: i for i, t in enumerate(tokens[:max(size, len(known))])}  # the characters are never cut


def tiny_sentence_model(sentences: Sequence[str], *, hidden: int = 32, layers: int = 2, heads: int = 2,
                        vocab_size: int = 300, max_positions: int = 128, pooling: str = "mean",
                        normalize: bool = True, seed: int = 0) -> TinySentenceModel:
    """The model, its tokenizer (lowercasing WordPiece, [CLS] ... [SEP]) and its module files; `pooling` is "mean"
    or "cls"."""
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    wp = BertWordPieceTokenizer(vocab=wordpiece_vocab(sentences, vocab_size), lowercase=True)
    tok = BertTokenizerFast(tokenizer_object=wp._tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                            cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                            model_max_length=max_positions)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=2 * hidden, max_position_embeddings=max_positions,
                        pad_token_id=tok.pad_token_id)
    model = BertModel(config).eval()
    return TinySentenceModel(model, tok, module_files(hidden, pooling, normalize, max_positions))
