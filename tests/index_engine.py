"""infini-gram's engine over an index (what `overlap --index` asked before it moved to the batched numpy search,
jobs/parts/index/query.py): the old way, kept as the reference the new answers are checked against. The engine
reads the same files (`index-corpus` writes infini-gram's format)."""
from __future__ import annotations

import json


def engine(local) -> object:
    from infini_gram.engine import InfiniGramEngine

    from jobs.parts.index.reader import part_dirs

    return InfiniGramEngine(index_dir=part_dirs(local), eos_token_id=0, vocab_size=2**32 - 1, token_dtype="u32",
                            version=4)


def engine_documents(eng, ids: list[int], limit: int, max_fetch: int = 1000) -> tuple[int, list[str]]:
    """(count, the first `limit` distinct document ids in corpus order), as index_query asked the engine."""
    found = eng.find(ids)
    out: list[str] = []
    for s, (lo, hi) in enumerate(found["segment_by_shard"]):
        hits = sorted((d["doc_ix"], json.loads(d["metadata"])["id"]) for d in
                      (eng.get_doc_by_rank(s=s, rank=r, max_disp_len=1) for r in range(lo, min(hi, lo + max_fetch))))
        for _, doc in hits:
            if doc not in out:
                out.append(doc)
        if len(out) >= limit:
            return int(found["cnt"]), out[:limit]
    return int(found["cnt"]), out
