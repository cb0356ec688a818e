"""The trace study (known truth): does `tidemark trace` lead a model's output back to the documents it was trained
on, and only to them?

    corpus: State of the Union passages as documents (scoring/studies/known_membership.sotu_passages): `seen`
            documents that the target trains on `repeats` times, and `background` documents trained on once; the
            corpus index holds every seen and background document once (`tidemark index-corpus`).
    models: the target (seen x repeats + background) and its control (background only, the same steps): a model
            that never read the seen documents, which still shares the corpus's common phrases.
    texts:  each model's sampled continuations (`samples` per prompt, temperature `temperature`, top-p 0.95) of the seen
            documents' openings (`prompt_words` words), the continuation alone traced (`tidemark trace`).

Measured, per model: the share of continuations with a span of at least `min_words` words (and, traced again at
COMMON_WORDS, the common phrases: how long and how rare the control's runs get); document-level
precision (of the documents traced from a continuation, the share that is the document it was prompted from) and
recall (of the continuations, the share whose traced documents include their source; and per seen document, at
least one of its samples). The control's spans should stay at the common-phrase level: short, and below the
target's in rarity (`rarer_than_every_control_span`: the share of the target's spans rarer than all of them). `make test-slow` runs it small (tests/jobs/commands/test_trace_study.py); bench/trace_bench.py in full.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class TraceStudy:
    seen: int = 30  # documents the target trains on many times
    background: int = 300  # documents both models train on once
    words: int = 96  # words per document
    repeats: int = 30
    prompt_words: int = 24
    new_tokens: int = 48
    samples: int = 3
    temperature: float = 0.7  # a memorised passage at temperature 1 from a 2-layer model drifts within a few words
    steps: int = 1200
    min_words: int = 8
    seed: int = 0


COMMON_WORDS = 4  # a second trace at this length shows the common phrases every model shares with the corpus
QUICK = TraceStudy(seen=10, background=60, words=64, repeats=40, steps=600, samples=2)


def build_corpus(cfg: TraceStudy, root: Path) -> dict:
    from scoring.studies.known_membership import sotu_passages

    pool = sotu_passages(cfg.words, cfg.seen + cfg.background, seed=cfg.seed)
    if len(pool) < cfg.seen + cfg.background:
        raise ValueError(f"only {len(pool)} passages of {cfg.words} words")
    seen, background = pool[:cfg.seen], pool[cfg.seen:cfg.seen + cfg.background]
    root.mkdir(parents=True, exist_ok=True)
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": p["id"], "text": p["text"]}) + "\n" for p in seen + background))
    return {"seen": seen, "background": background, "corpus": corpus}


def train_models(cfg: TraceStudy, data: dict, root: Path) -> dict:
    from jobs.kit.studies import train_tiny_gpt2

    everything = [p["text"] for p in data["seen"] + data["background"]]
    texts = {"target": [p["text"] for p in data["seen"]] * cfg.repeats + [p["text"] for p in data["background"]],
             "control": [p["text"] for p in data["background"]]}
    out = {}
    for name, train in texts.items():  # one tokenizer vocabulary for both: fit on every document
        rec = train_tiny_gpt2(train, root / name, tokenizer_texts=everything, steps=cfg.steps, seed=cfg.seed,
                              vocab_size=2000, context=128, positions=256)
        out[name] = {"path": str(root / name), "final_loss": rec.get("final_loss"), "steps": cfg.steps}
    return out


def sample_continuations(model_dir: str, prompts: list[dict], cfg: TraceStudy) -> list[dict]:
    """`samples` continuations per prompt ({"id", "prompt"}); the continuation's text alone."""
    import torch
    from transformers import AutoTokenizer, GPT2LMHeadModel

    torch.manual_seed(cfg.seed)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = GPT2LMHeadModel.from_pretrained(model_dir).eval()
    rows = []
    for p in prompts:
        ids = tok(p["prompt"], return_tensors="pt").input_ids
        with torch.no_grad():
            out = model.generate(ids, do_sample=True, temperature=cfg.temperature, top_p=0.95, max_new_tokens=cfg.new_tokens,
                                 num_return_sequences=cfg.samples, pad_token_id=tok.eos_token_id or 0)
        for k, seq in enumerate(out):
            rows.append({"id": f"{p['id']}#{k}", "source": p["id"],
                         "text": tok.decode(seq[ids.shape[1]:], skip_special_tokens=True)})
    return rows


def document_scores(spans: list[dict], texts: list[dict], seen_ids: set[str]) -> dict:
    """Document-level precision and recall of the traced documents against the document each text was prompted
    from, and how the spans look (their length and rarity)."""
    by_text: dict[str, set] = {}
    longest: dict[str, int] = {}
    for s in spans:
        by_text.setdefault(s["id"], set()).update(s["doc_ids"])
        longest[s["id"]] = max(longest.get(s["id"], 0), s["words"])
    cited = sum(len(v) for v in by_text.values())
    right = sum(1 for t in texts if t["source"] in by_text.get(t["id"], set()))
    per_doc = {}
    for t in texts:
        per_doc[t["source"]] = per_doc.get(t["source"], False) or t["source"] in by_text.get(t["id"], set())
    seen_cited = sum(len(v & seen_ids) for v in by_text.values())
    into_seen = [s for s in spans if set(s["doc_ids"]) & seen_ids]
    n = len(texts)
    return {"texts": n, "texts_with_span": len(by_text), "share_with_span": len(by_text) / n if n else None,
            "documents_cited": cited, "precision": right / cited if cited else None,
            "recall_texts": right / n if n else None,
            "recall_documents": sum(per_doc.values()) / len(per_doc) if per_doc else None,
            "seen_share_of_cited": seen_cited / cited if cited else None,
            "texts_with_span_into_seen": len({s["id"] for s in into_seen}),
            "longest_span_into_seen": max((s["words"] for s in into_seen), default=0),
            "longest_span": max(longest.values(), default=0),
            "median_longest": sorted(longest.values())[len(longest) // 2] if longest else 0,
            "max_rarity": max((s["rarity"] for s in spans), default=0.0),
            "spans": len(spans)}


def run_study(cfg: TraceStudy, root: Path, progress: bool = False) -> dict:
    import pyarrow.parquet as pq

    from jobs.commands.index_corpus import IndexConfig, run_index
    from jobs.commands.trace import TraceConfig, run_trace
    from jobs.kit.log import log

    t0 = time.perf_counter()
    root = Path(root)
    data = build_corpus(cfg, root)
    models = train_models(cfg, data, root)
    log(f"[trace-study] trained target and control ({time.perf_counter() - t0:.0f} s)")
    run_index(IndexConfig(corpus=str(data["corpus"]), out=str(root / "idx"), progress=progress))
    prompts = [{"id": p["id"], "prompt": " ".join(p["text"].split()[:cfg.prompt_words])} for p in data["seen"]]
    seen_ids = {p["id"] for p in data["seen"]}
    res = {"config": asdict(cfg), "models": models}
    for name, m in models.items():
        texts = sample_continuations(m["path"], prompts, cfg)
        path = root / f"{name}_texts.jsonl"
        path.write_text("".join(json.dumps({"id": t["id"], "text": t["text"]}) + "\n" for t in texts))
        traced = run_trace(TraceConfig(index=str(root / "idx"), texts=str(path), out=str(root / f"trace_{name}"),
                                       min_words=cfg.min_words, progress=progress))
        spans = pq.read_table(root / f"trace_{name}" / "spans.parquet").to_pylist()
        run_trace(TraceConfig(index=str(root / "idx"), texts=str(path), min_words=COMMON_WORDS,
                              out=str(root / f"trace_{name}_short"), progress=progress))
        shorts = pq.read_table(root / f"trace_{name}_short" / "spans.parquet").to_pylist()
        res[name] = {**document_scores(spans, texts, seen_ids), "trace_seconds": traced["seconds"],
                     "examples": _examples(spans, texts), "common": _common(shorts, seen_ids),
                     "rarities": sorted(s["rarity"] for s in spans)}
        log(f"[trace-study] {name}: {res[name]['texts_with_span']}/{res[name]['texts']} continuations with a span of "
            f">= {cfg.min_words} words; precision {res[name]['precision']}, recall {res[name]['recall_texts']}")
    ceiling = res["control"]["common"]["max_rarity"]  # the rarest run the control shares with the corpus
    rare = [r for r in res["target"]["rarities"] if r > ceiling]
    res["target"]["rarer_than_every_control_span"] = len(rare) / len(res["target"]["rarities"]) \
        if res["target"]["rarities"] else None
    res["seconds"] = round(time.perf_counter() - t0, 1)
    return res


def _common(spans: list[dict], seen_ids: set[str]) -> dict:
    """The spans of at least COMMON_WORDS words: how many, the longest, the rarest, and those into seen passages."""
    into = [s for s in spans if set(s["doc_ids"]) & seen_ids]
    return {"min_words": COMMON_WORDS, "spans": len(spans), "longest": max((s["words"] for s in spans), default=0),
            "max_rarity": max((s["rarity"] for s in spans), default=0.0),
            "into_seen": len(into), "longest_into_seen": max((s["words"] for s in into), default=0)}


def _examples(spans: list[dict], texts: list[dict], k: int = 3) -> list[dict]:
    """The k longest spans with their text's source, for the bench's table."""
    source = {t["id"]: t["source"] for t in texts}
    top = sorted(spans, key=lambda s: (-s["words"], -s["rarity"]))[:k]
    return [{"id": s["id"], "source": source.get(s["id"]), "words": s["words"], "count": s["count"],
             "rarity": round(s["rarity"], 1), "span": s["span"], "doc_ids": s["doc_ids"][:3]} for s in top]
