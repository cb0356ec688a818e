"""Canaries sampled from a local causal LM (`canary make --generator lm:PATH`): fluent-looking sequences instead of
random words, for owners who want canaries that read like their text. Sampling is seeded (torch's CPU generator),
so the same seed, model and library versions give the same canaries; the manifest records all three.

The model is loaded from a local directory only (no download). Each canary is the first `words` words of a
sample started from the model's BOS token at `temperature`, with whitespace folded to single spaces (plant.txt
holds one canary per line); a sample too short or already drawn is drawn again. A higher temperature gives less
likely text, which Meeus et al. (2024) found easier to detect once planted.
"""
from __future__ import annotations

MAX_DRAWS = 20  # samples per canary before giving up (a model that keeps stopping early or repeating itself)


def sample_texts(model_dir: str, n: int, words: int, seed: int, temperature: float = 1.0,
                 batch_size: int = 16) -> list[str]:
    """n unique texts of exactly `words` words sampled from the model at `model_dir`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if temperature <= 0:
        raise ValueError("--temperature must be > 0 (0 would give the same greedy text every time)")
    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True).eval()
    start = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    if start is None:
        raise ValueError(f"{model_dir}: the tokenizer has no BOS or EOS token to start a sample from")
    gen = torch.Generator().manual_seed(seed)
    max_new = words * 4  # BPE words are ~1.3-2 tokens; 4 leaves room for punctuation
    texts, seen, draws = [], set(), 0
    while len(texts) < n:
        if draws > MAX_DRAWS * n:
            raise ValueError(f"{model_dir}: only {len(texts)} unique samples of {words} words in {draws} draws; "
                             "try a higher --temperature or fewer --words")
        ids = torch.full((batch_size, 1), start, dtype=torch.long)
        with torch.no_grad():  # a plain sampling loop with a KV cache: generate()'s sampler takes no generator
            step = model(input_ids=ids, use_cache=True)
            for _ in range(max_new):
                probs = torch.softmax(step.logits[:, -1, :].float() / temperature, dim=-1)
                nxt = torch.multinomial(probs, 1, generator=gen)
                ids = torch.cat([ids, nxt], dim=1)
                step = model(input_ids=nxt, cache=step.cache, use_cache=True)
        draws += batch_size
        for row in ids[:, 1:].tolist():
            cut = row.index(tok.eos_token_id) if tok.eos_token_id in row else len(row)
            text_words = tok.decode(row[:cut], skip_special_tokens=True).split()
            text = " ".join(text_words[:words])
            if len(text_words) < words or "\ufffd" in text:
                continue  # too short, or cut inside a character (a byte-level BPE sample can be)
            if text not in seen and len(texts) < n:
                seen.add(text)
                texts.append(text)
    return texts
