"""A local masked language model (BERT, RoBERTa, DistilBERT, ...) as a source of one-word substitutes: the
neighbourhood attack's neighbours (scoring/lm/neighbours.py) and the `mlm:PATH` paraphrase rewriter
(curation/paraphrase/rewriters.py) both ask it "which whole words could stand in this word's place?".

Words are swapped in the original text by character span, so everything else in the text (spacing, case of the
other words, punctuation) stays byte-identical; decoding the MLM's token ids instead would lowercase an uncased
model's whole text and respace it, and the target model would then score those changes too.

A *slot* is a word the MLM holds as exactly one token (a word split into sub-words is not offered: its one-token
substitute would not be a like-for-like swap). A candidate must itself be a whole alphabetic word (no `##ing`
continuation), differ from the original ignoring case, and takes the original's capitalisation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

WORD_START_MARKERS = ("Ġ", "▁")  # byte-level BPE (RoBERTa) and SentencePiece word-initial markers


@dataclass(frozen=True)
class Slot:
    """A swappable word: its token position in the MLM's encoding and its character span in the text."""

    token: int
    start: int
    end: int
    word: str


@dataclass(frozen=True)
class Substitute:
    slot: Slot
    word: str  # the replacement, capitalised like the original
    prob: float  # the MLM's probability of the replacement at the slot
    score: float  # how the caller ranks it (neighbours: prob / (1 - p(original)), as in Mattern et al.)

    def apply(self, text: str) -> str:
        return text[: self.slot.start] + self.word + text[self.slot.end:]


def match_case(word: str, like: str) -> str:
    if len(like) > 1 and like.isupper():
        return word.upper()
    if like[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def _is_boundary(text: str, i: int) -> bool:
    return i < 0 or i >= len(text) or not (text[i].isalnum() or text[i] in "'’-_")


class MaskedLM:
    """A local MLM and its fast tokenizer, loaded once per worker. `device` as for the scorer ("cpu", "cuda")."""

    def __init__(self, path: str, device: str = "cpu", max_length: int = 512, batch_size: int = 64):
        import torch
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        self.path, self.device = str(path), device
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        if not getattr(self.tokenizer, "is_fast", False):
            raise ValueError(f"{path}: a fast tokenizer is required (words are swapped by character offsets)")
        self.model = AutoModelForMaskedLM.from_pretrained(self.path).to(device).eval()
        positions = getattr(self.model.config, "max_position_embeddings", None) or max_length
        self.max_length = int(min(max_length, positions - 2 if positions > 2 else positions))
        self.batch_size = batch_size
        self._torch = torch
        vocab = self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))
        special = set(self.tokenizer.all_special_ids)
        # Per vocabulary entry: the whole word it stands for, or None (sub-word pieces, punctuation, specials).
        self.word_of = [None if i in special else self._word(t) for i, t in enumerate(vocab)]
        self.marker_of = [t[:1] if t[:1] in WORD_START_MARKERS else "" for t in vocab]

    def _word(self, token: str) -> str | None:
        if token.startswith("##"):
            return None
        word = self.tokenizer.convert_tokens_to_string([token]).strip()
        return word if word.isalpha() else None

    def encode(self, text: str) -> tuple[list[int], list[Slot]]:
        enc = self.tokenizer(text, truncation=True, max_length=self.max_length, return_offsets_mapping=True)
        ids = list(enc["input_ids"])
        slots = []
        for k, (s, e) in enumerate(enc["offset_mapping"]):
            if e <= s or self.word_of[ids[k]] is None:
                continue
            word = text[s:e]
            if word.isalpha() and _is_boundary(text, s - 1) and _is_boundary(text, e):
                slots.append(Slot(k, int(s), int(e), word))
        return ids, slots

    def substitutes(self, ids: Sequence[int], slots: Sequence[Slot], *, top: int, mode: str, dropout: float = 0.0,
                    seeds: Sequence[int] | None = None) -> list[list[Substitute]]:
        """Per slot, up to `top` whole-word substitutes, best first. mode "dropout": the slot's input embedding
        goes through dropout with probability `dropout` (seeded per slot by `seeds`), so the MLM still sees a
        noisy trace of the word (Mattern et al.); mode "mask": the slot is the mask token (plain fill-in)."""
        torch = self._torch
        if not slots:
            return []
        ids_t = torch.tensor([list(ids)], device=self.device)
        embed = self.model.get_input_embeddings()
        out: list[list[Substitute]] = []
        with torch.no_grad():
            base = embed(ids_t)[0]  # (L, H)
            mask_vec = None
            if mode == "mask":
                if self.tokenizer.mask_token_id is None:
                    raise ValueError(f"{self.path} has no mask token")
                mask_vec = embed(torch.tensor([self.tokenizer.mask_token_id], device=self.device))[0]
            for a in range(0, len(slots), self.batch_size):
                chunk = slots[a: a + self.batch_size]
                x = base.unsqueeze(0).repeat(len(chunk), 1, 1)
                for b, slot in enumerate(chunk):
                    if mode == "mask":
                        x[b, slot.token] = mask_vec
                    elif mode == "dropout":
                        g = torch.Generator().manual_seed(int(seeds[a + b]) % (2 ** 63))
                        keep = (torch.rand(base.shape[1], generator=g) >= dropout).to(base.dtype).to(self.device)
                        x[b, slot.token] = x[b, slot.token] * keep / max(1e-9, 1.0 - dropout)
                    else:
                        raise ValueError(f"unknown mode {mode!r}")
                logits = self.model(inputs_embeds=x).logits.float()
                rows = torch.arange(len(chunk), device=self.device)
                probs = torch.softmax(logits[rows, torch.tensor([s.token for s in chunk], device=self.device)], -1)
                # Enough candidates that `top` usually survive the whole-word filter.
                p_top, i_top = torch.topk(probs, min(probs.shape[-1], 4 * top + 8), dim=-1)
                p_top, i_top = p_top.cpu().numpy(), i_top.cpu().numpy()
                for b, slot in enumerate(chunk):
                    original = ids[slot.token]
                    p_orig = float(probs[b, original])
                    out.append(self._pick(slot, original, p_orig, p_top[b], i_top[b], top))
        return out

    def _pick(self, slot: Slot, original: int, p_orig: float, probs: np.ndarray, cands: np.ndarray,
              top: int) -> list[Substitute]:
        picked, seen = [], {slot.word.lower()}
        for p, c in zip(probs.tolist(), cands.tolist()):
            word = self.word_of[c]
            if c == original or word is None or word.lower() in seen:
                continue
            if self.marker_of[original] and self.marker_of[c] != self.marker_of[original]:
                continue  # a word-initial slot takes a word-initial token
            seen.add(word.lower())
            picked.append(Substitute(slot, match_case(word, slot.word), float(p),
                                     float(p) / max(1e-12, 1.0 - p_orig)))
            if len(picked) == top:
                break
        return picked
