"""A tiny GPT-2 trained from scratch on CPU in seconds: the known-membership ground truth for tests, the demo
and the contamination study. Members are in its training data (repeated), non-members are not.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

import numpy as np


def train_tokenizer(texts: Sequence[str], vocab_size: int = 2000):
    """A byte-level BPE tokenizer (GPT-2 style) trained on `texts`, wrapped as a fast HF tokenizer."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(list(texts), vocab_size=vocab_size, min_frequency=2, special_tokens=["<|endoftext|>"],
                            show_progress=False)
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>",
                                   bos_token="<|endoftext|>", unk_token="<|endoftext|>", pad_token="<|endoftext|>")


def fit_tiny_gpt2(
    train_texts: Sequence[str],
    *,
    tokenizer_texts: Sequence[str] | None = None,
    n_layer: int = 2,
    n_embd: int = 128,
    n_head: int = 4,
    context: int = 256,
    positions: int | None = None,
    vocab_size: int = 2000,
    steps: int | None = None,
    seconds: float = 10.0,
    lr: float = 3e-3,
    batch_size: int = 16,
    seed: int = 0,
    init_from: str | Path | None = None,
    progress: bool = False,
) -> dict:
    """Train (or continue training `init_from`) on `train_texts` packed into `context`-token blocks, one epoch per
    pass over the shuffled blocks, for `steps` steps or `seconds` of wall time; the model takes `positions` tokens
    (default: `context`; more lets prompts longer than the training blocks in). Returns (model, tokenizer, a small
    training record); jobs/kit/studies.train_tiny_gpt2 saves them where `load_causal_lm` reads them."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    torch.manual_seed(seed)
    if init_from:
        tok = PreTrainedTokenizerFast.from_pretrained(str(init_from))
        model = GPT2LMHeadModel.from_pretrained(str(init_from))
    else:
        tok = train_tokenizer(tokenizer_texts or train_texts, vocab_size=vocab_size)
        cfg = GPT2Config(vocab_size=len(tok), n_positions=positions or context, n_embd=n_embd, n_layer=n_layer,
                         n_head=n_head, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
        model = GPT2LMHeadModel(cfg)
    eos = tok.eos_token_id
    stream = []
    for ids in tok(list(train_texts))["input_ids"]:
        stream.extend(ids + [eos])
    n_blocks = max(1, len(stream) // context)
    blocks = torch.tensor(stream[: n_blocks * context] or stream, dtype=torch.long).view(n_blocks, -1)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    rng = np.random.default_rng(seed)
    start, step, losses = time.perf_counter(), 0, []
    order: list[int] = []
    while True:
        if steps is not None and step >= steps:
            break
        if steps is None and time.perf_counter() - start >= seconds:
            break
        if len(order) < batch_size:
            order.extend(rng.permutation(n_blocks).tolist())
        idx, order = order[:batch_size], order[batch_size:]
        batch = blocks[idx]
        with torch.enable_grad():  # load_causal_lm turns autograd off process-wide; training must not depend on it
            loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        step += 1
        if progress and step % 20 == 0:
            print(f"  step {step}  loss {np.mean(losses[-20:]):.3f}", flush=True)
    model.eval()
    return model, tok, {
        "steps": step, "seconds": round(time.perf_counter() - start, 2),
        "tokens_per_epoch": int(blocks.numel()), "epochs": round(step * batch_size / n_blocks, 2),
        "final_loss": float(np.mean(losses[-10:])) if losses else float("nan"),
        "params": int(sum(p.numel() for p in model.parameters())),
    }


def fit_tiny_mlm(texts: Sequence[str], *, vocab_size: int = 2000, hidden: int = 64,
                   layers: int = 2, heads: int = 2, context: int = 128, seconds: float = 8.0, lr: float = 2e-3,
                   batch_size: int = 16, mask_rate: float = 0.15, seed: int = 0) -> dict:
    """A tiny BERT masked LM (lower-cased WordPiece) trained on `texts` for `seconds` of CPU time: the local MLM
    the neighbourhood attack and the `mlm:` paraphrase rewriter load by path in tests and the demo. Masking as in
    BERT: `mask_rate` of the tokens, of which 80% become [MASK], 10% a random token, 10% stay. Returns (model,
    tokenizer, a training record); jobs/kit/studies.train_tiny_mlm saves them."""
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    torch.manual_seed(seed)
    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(list(texts), vocab_size=vocab_size, min_frequency=2, show_progress=False)
    tok = BertTokenizerFast(tokenizer_object=wp._tokenizer, do_lower_case=True, unk_token="[UNK]",
                            sep_token="[SEP]", pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]")
    cfg = BertConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=4 * hidden, max_position_embeddings=max(context, 512))
    model = BertForMaskedLM(cfg)
    enc = tok(list(texts), truncation=True, max_length=context, padding="max_length", return_tensors="pt")
    ids, attn = enc["input_ids"], enc["attention_mask"]
    special = torch.tensor(sorted(set(tok.all_special_ids)))
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    start, step, losses = time.perf_counter(), 0, []
    while time.perf_counter() - start < seconds:
        rows = torch.randint(0, ids.shape[0], (batch_size,), generator=gen)
        x, a = ids[rows].clone(), attn[rows]
        maskable = ~torch.isin(x, special) & a.bool()
        chosen = (torch.rand(x.shape, generator=gen) < mask_rate) & maskable
        if not chosen.any():
            continue
        labels = torch.where(chosen, x, torch.full_like(x, -100))
        roll = torch.rand(x.shape, generator=gen)
        x[chosen & (roll < 0.8)] = tok.mask_token_id
        swap = chosen & (roll >= 0.8) & (roll < 0.9)
        x[swap] = torch.randint(0, len(tok), (int(swap.sum()),), generator=gen)
        with torch.enable_grad():
            loss = model(input_ids=x, attention_mask=a, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        step += 1
    model.eval()
    return model, tok, {"steps": step, "seconds": round(time.perf_counter() - start, 2),
            "final_loss": float(np.mean(losses[-10:])) if losses else float("nan"),
            "params": int(sum(p.numel() for p in model.parameters()))}
