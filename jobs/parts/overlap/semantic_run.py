"""`overlap --semantic` on the driver: the benchmark side (benchmark-sized) and the merge of the corpus parts.

    driver: embed the benchmark's items and the null's (scoring/semantic/embed.py), size the windows to the items
            (windows.window_plan), one part per corpus file (corpus_scan.plan_corpus_parts)
    workers: the parts on the one scoring pool through the one part loop (semantic_parts.py: resume by part under
            OUT/semantic/, node-loss replanning, the stall bound)
    driver: merge each query's top k over the parts from the candidates' small columns (query, rank, cosine, window
            id), read the texts of the chosen windows only, verify every item against its candidates and decide
            (scoring/semantic/decide.py), set the threshold on the null (calibrate.threshold_from_null), with
            --judge-model ask the LLM judge about the decided pairs (semantic_judge.py), and return semantic.parquet's
            rows and report.json's `semantic` block.

The driver holds the query vectors and n_queries x k candidates, never the corpus's windows or their vectors.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from curation.io.ledger import reason_counts
from jobs.parts.overlap.semantic_judge import JudgeRequest, run_judge
from jobs.parts.overlap.semantic_parts import NOT_ISOLATED, PART_BITS, PART_DIRS, SEMANTIC_DIR, PrepareWindows, \
    ScoreWindows, part_item

JOB = "overlap-semantic"
SHOWN = 200  # flagged items whose texts report.json (and report.html) carry; semantic.parquet has every one
HIST_BINS = 10
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


@dataclass(frozen=True)
class SemanticRequest:
    """What the command resolved for the semantic pass (nothing here reads the command's config)."""

    corpus: str | None  # None with `index`
    embedder: str  # an absolute sentence-transformers directory (resolve_embedder on the driver)
    embedder_name: str  # as given (`minilm` or a path)
    top_k: int
    window_words: int | None  # None: sized from the items
    window_stride: int | None
    text_field: str
    id_field: str | None
    opts: dict
    answer_field: str | None  # the rows' answer field, None when they carry none
    false_flag_rate: float
    null_path: str | None = None
    resume: bool = True
    progress: bool = True
    max_tokens: int = 256
    batch_tokens: int = 16384
    judge: JudgeRequest | None = None  # the LLM judge of the decided pairs (--judge-model), or none
    prefilter: float | None = None  # the first stage's bar (--prefilter), None: every window is embedded
    actors: int = 0  # the embedder's actors (0: as many as suit the cluster, jobs/plane/scoring_pool.pool_actors)
    gpus_per_actor: float = 0.0  # > 0: the windows are embedded on GPUs
    index: str | None = None  # a corpus index with embeddings (index-corpus --embeddings), searched instead of `corpus`


@dataclass
class SemanticResult:
    rows: list[dict]  # semantic.parquet's, in benchmark order
    block: dict  # report.json's `semantic`


def plan_windows(texts: Sequence[str], words: int | None, stride: int | None,
                 index: str | None = None) -> tuple[Any, str]:
    """The window plan and how it was sized: an index's own (`words` and `stride` are its plan, checked against
    the command's by semantic_index.check_index), --window-words, else from the items (windows.window_plan)."""
    from scoring.semantic.windows import WindowPlan, window_plan, word_count

    if index:
        return WindowPlan(words, stride), f"the index's windows (index-corpus --embeddings: {index})"
    if words:
        return WindowPlan(words, stride or max(1, words // 2)), f"--window-words {words}"
    counts = [word_count(t) for t in texts]
    plan = window_plan(counts, stride=stride)
    return plan, (f"2 x the median item length ({float(np.median(counts)):g} words over {len(counts):,} items), "
                  f"clamped to [16, 256]; stride {'--window-stride' if stride else 'size // 2'}")


def embedder_identity(path: str) -> dict:
    """The embedder's files and digests (jobs/kit/identity.model_identity), and one digest of its weight files."""
    from jobs.kit.identity import json_digest, model_identity

    ident = model_identity(path)
    weights = [f for f in ident.get("files", []) if f["name"].endswith(WEIGHT_SUFFIXES)]
    return {"identity": ident, "weights_digest": json_digest(weights)}


def fingerprint(req: SemanticRequest, plan, ident: dict, query_texts: Sequence[str]) -> str:
    """Everything that changes a part's files: the embedder (its files' digests), the window plan, k, the queries'
    texts (the vectors are theirs under this embedder), how records are read, the embedding's limits, the parts'
    format and where the windows come from (a corpus's files or an index's stored vectors: the parts differ), the
    tool."""
    from jobs.kit.identity import json_digest, tool_version
    from jobs.parts.overlap.semantic_parts import PART_FORMAT

    texts = hashlib.sha256(json.dumps(list(query_texts)).encode()).hexdigest()
    return json_digest({"job": JOB, "format": PART_FORMAT, "source": "index" if req.index else "corpus",
                        "embedder": ident["identity"], "window": [plan.size, plan.stride],
                        "top_k": req.top_k, "queries": texts, "text_field": req.text_field,
                        "id_field": req.id_field, "max_tokens": req.max_tokens, "batch_tokens": req.batch_tokens,
                        "tool": tool_version(), **({"prefilter": req.prefilter} if req.prefilter else {})})


def run_corpus_parts(req: SemanticRequest, plan, queries: np.ndarray, fp: str, where,
                     prefilter: dict | None = None) -> tuple[list, dict, dict]:
    """Every corpus part through the pool and the part loop: (parts, {index: summary}, the loop's stats). With
    req.index, the index's parts searched instead (semantic_index.py: stored vectors, nothing embedded)."""
    if req.index:
        from jobs.parts.overlap.semantic_index import run_index_parts

        return run_index_parts(req, queries, fp, where)
    from curation.io.outputs import new_run_id
    from jobs.kit.runtime import start_driver
    from jobs.parts.overlap.corpus_scan import part_digest, plan_corpus_parts
    from jobs.plane.part_loop import run_parts
    from jobs.plane.part_store import PartStore
    from jobs.plane.runners import RAY
    from jobs.plane.scoring_pool import ModelBranch, PoolStages, ScoringSpec

    parts = plan_corpus_parts(req.corpus, req.opts)
    read = {"text_field": req.text_field, "id_field": req.id_field, "opts": req.opts, "window_words": plan.size,
            "window_stride": plan.stride}
    spec = ScoringSpec((ModelBranch(req.embedder, ("original",)),), actors=req.actors,
                       gpus_per_actor=req.gpus_per_actor)
    stages = PoolStages(PrepareWindows, {"prefilter": prefilter}, ScoreWindows, {"dest": where.uri},
                        {"queries": queries, "top_k": req.top_k, "max_tokens": req.max_tokens,
                         "batch_tokens": req.batch_tokens})

    def pool(pending):
        return RAY.pipeline(spec, [part_item(p, read) for p in pending], stages, req.progress)

    stats: dict = {}
    summaries = run_parts(parts, index=lambda p: p.index,
                          digests={p.index: part_digest(p, req.opts) for p in parts},
                          store=PartStore(where, fp, PART_DIRS), pool=pool, runner=RAY, stats=stats,
                          run_id=new_run_id(), resume=req.resume, not_isolated=NOT_ISOLATED, start=start_driver)
    return parts, summaries, stats


def merged_top_k(where, indices, n_queries: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each query's k nearest windows over every part, from the candidates' small columns, part by part (the
    driver holds n_queries x k, whatever the corpus)."""
    from jobs.plane.part_store import part_name
    from scoring.semantic.search import PAD_ID, merge_top_k, top_k

    best = top_k(np.zeros((n_queries, 1), np.float32), np.zeros((0, 1), np.float32), k)
    for i in sorted(indices):
        t = where.read_parquet(f"candidates.parquet/{part_name(i)}.parquet", columns=["query", "rank", "cosine",
                                                                                        "window"])
        q, r = t.column("query").to_numpy(), t.column("rank").to_numpy()
        s = np.full((n_queries, k), -np.inf, np.float32)
        ids = np.full((n_queries, k), PAD_ID, np.int64)
        s[q, r], ids[q, r] = t.column("cosine").to_numpy(), t.column("window").to_numpy()
        best = merge_top_k([best, (s, ids)], k)
    return best


def chosen_windows(where, ids: np.ndarray) -> dict[int, dict]:
    """The chosen windows' doc ids, offsets and texts, read from their parts' windows.parquet (each candidate window
    once), only the parts that hold a chosen one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from jobs.plane.part_store import part_name

    wanted = np.unique(ids[ids >= 0])
    out: dict[int, dict] = {}
    for part in np.unique(wanted >> PART_BITS):
        mine = wanted[(wanted >> PART_BITS) == part]
        t = where.read_parquet(f"windows.parquet/{part_name(int(part))}.parquet")
        t = t.filter(pc.is_in(t.column("window"), value_set=pa.array(mine, pa.int64())))
        for r in t.to_pylist():
            out.setdefault(r.pop("window"), r)
    return out


def decisions(texts: Sequence[str], answers: Sequence[str | None], scores: np.ndarray, ids: np.ndarray,
              windows: dict[int, dict]) -> list:
    """Every query's Decision (scoring/semantic/decide.py) over its merged candidates."""
    from scoring.semantic.anchors import anchors
    from scoring.semantic.decide import Candidate, decide
    from scoring.semantic.verify import WindowTerms

    terms: dict[str, WindowTerms] = {}

    def cached(text: str) -> WindowTerms:
        if text not in terms:
            terms[text] = WindowTerms.of(text)
        return terms[text]

    out = []
    for q, (text, answer) in enumerate(zip(texts, answers)):
        cands = [Candidate(rank=r, cosine=float(scores[q, r]), **windows[int(ids[q, r])])
                 for r in range(ids.shape[1]) if ids[q, r] >= 0]
        out.append(decide(anchors(text, answer), cands, cached))
    return out


def threshold_block(null_scores: Sequence[float] | None, rate: float, null_info: dict | None) -> dict:
    """The threshold and what it is known to flag: set on the null when there is one, else the default and the
    rate the study measured for it (calibrate.DEFAULT_CALIBRATION)."""
    from scoring.semantic.calibrate import DEFAULT_CALIBRATION, DEFAULT_THRESHOLD, threshold_from_null

    if null_scores is None:
        d = DEFAULT_CALIBRATION
        return {"threshold": DEFAULT_THRESHOLD, "expected_false_flag_rate": d["rate"],
                "false_flag_upper_bound": d["upper_bound"], "false_flag_bound": "one-sided 95% Clopper-Pearson",
                "null": None, "threshold_source": "default",
                "default_calibration": d,
                "threshold_reason": f"no --null given: the default threshold, calibrated at 1% on the study's null "
                                    f"({d['n_flagged']} of {d['n_null']} null items flagged; {d['source']}). It "
                                    "holds for benchmarks and corpora like the study's; give --null for yours"}
    c = threshold_from_null(null_scores, rate)
    return {"threshold": c.threshold, "expected_false_flag_rate": c.expected_false_flag_rate,
            "false_flag_upper_bound": c.upper_bound, "false_flag_bound": "one-sided 95% Clopper-Pearson",
            "target_false_flag_rate": rate, "threshold_source": "null",
            "null": {**(null_info or {}), "n": c.n_null, "flagged": c.n_flagged},
            "threshold_reason": f"the smallest threshold that flags at most {rate:g} of the null's items "
                                "(measured on the same null it was set on, which flatters the rate)"}


def histogram(values: Sequence[float]) -> list[int]:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], np.float64)
    return np.histogram(np.clip(v, 0, 1), bins=HIST_BINS, range=(0.0, 1.0))[0].tolist()


def histograms(out_rows: Sequence[dict]) -> dict:
    """semantic.png's counts: flagged and unflagged items by nearest cosine and by decision score."""
    out: dict = {"bins": HIST_BINS}
    for name, col in (("cosine", "score"), ("decision", "decision_score")):
        out[name] = {"flagged": histogram([r[col] for r in out_rows if r["rephrased"]]),
                     "unflagged": histogram([r[col] for r in out_rows if not r["rephrased"]])}
    return out


def shown_items(rows: Sequence[dict], items: Sequence, threshold: float, verdicts: Sequence) -> list[dict]:
    """The items flagged by the verifier or by the judge (a veto is worth seeing too), with their passages and the
    judge's verdict (None without one): what report.html shows side by side, the first SHOWN of them."""
    from scoring.semantic.decide import flagged
    from scoring.semantic.judge import rephrased

    return [{"id": r["id"], "item": r["input"], "passage": d.candidate.text, "doc_id": d.candidate.doc_id,
             "cosine": d.candidate.cosine, "decision_score": d.decision_score, "verifier_score": d.verdict.score,
             "abstain": d.verdict.abstain, "start_word": d.candidate.start_word,
             "char_start": d.candidate.char_start, "char_end": d.candidate.char_end, "judge": j,
             "rephrased": rephrased(flagged(d, threshold), j)}
            for r, d, j in zip(rows, items, verdicts) if flagged(d, threshold) or j == "yes"]


def verifier_block(answer_field: str | None) -> dict:
    """The decision rule and its constants, as report.json states them."""
    from scoring.semantic.calibrate import ABSTAIN_COSINE, COSINE_FLOOR
    from scoring.semantic.verify import MIN_WEIGHT, SMALL_NUMBER_MAX, SMALL_NUMBER_WEIGHT, WEIGHTS

    return {"rule": "decision = 0 if cosine < cosine_floor; else the verifier's weighted anchor recall, or "
                    "(cosine - abstain_cosine) / (1 - abstain_cosine) when the item abstains (its anchors weigh "
                    "< min_weight); rare words weigh weights.rare_words only for an item whose other anchors weigh "
                    "< min_weight, else 0; an item's decision is its best candidate's",
            "weights": WEIGHTS, "small_number_weight": SMALL_NUMBER_WEIGHT, "small_number_max": SMALL_NUMBER_MAX,
            "min_weight": MIN_WEIGHT, "cosine_floor": COSINE_FLOOR, "abstain_cosine": ABSTAIN_COSINE,
            "answer_field": answer_field}


def prefilter_input(bar: float | None, texts: Sequence[str], answers: Sequence) -> dict | None:
    """What PrepareWindows builds its Prefilter from: the bar and every query's anchors (benchmark-sized)."""
    if not bar:
        return None
    from scoring.semantic.anchors import anchors

    return {"bar": bar, "anchors": [anchors(t, a) for t, a in zip(texts, answers)]}


def prefilter_block(stage1: dict | None, summaries: dict, threshold: float) -> dict | None:
    """report.json's `semantic.prefilter`: the bar, windows cut and embedded, and what the first stage cannot see."""
    if stage1 is None:
        return None
    from scoring.semantic.prefilter import Prefilter

    pf = Prefilter(stage1["anchors"], stage1["bar"])
    cut = sum(s.get("windows_cut", s["windows"]) for s in summaries.values())
    kept = sum(s["windows"] for s in summaries.values())
    return {"bar": stage1["bar"], "windows_cut": cut, "windows_embedded": kept,
            "embedded_share": kept / cut if cut else None, "abstaining_queries": len(pf.abstaining),
            "uncovered_queries": pf.uncovered, "threshold_below_bar": threshold < stage1["bar"],
            "rule": "a window is embedded when it holds >= bar of some query's anchor weight (the verifier's "
                    "weights), or any anchor of a query that abstains; no flag of a query with anchors is lost "
                    "while the threshold is >= bar (scoring/semantic/prefilter.py); queries with no anchor "
                    "(uncovered) get no candidate"}


def semantic_overlap(rows: Sequence[dict], null_rows: Sequence[dict] | None, null_info: dict | None,
                     req: SemanticRequest, dest) -> SemanticResult:
    """The semantic pass over a benchmark's readable rows (and a null's), its part files under OUT/semantic/."""
    from curation.io.ledger import Ledger
    from curation.io.outputs import Location
    from scoring.semantic.decide import rephrased_share, semantic_row
    from scoring.semantic.embed import Embedder

    t0 = time.perf_counter()
    texts = [r["input"] for r in rows]
    null_texts = [r["input"] for r in null_rows or ()]
    plan, how = plan_windows(texts, req.window_words, req.window_stride, index=req.index)
    ident = embedder_identity(req.embedder)
    queries = Embedder(req.embedder, max_tokens=req.max_tokens, batch_tokens=req.batch_tokens).embed(
        texts + null_texts)
    where = Location(dest.child(SEMANTIC_DIR))
    answers = [r.get(req.answer_field) if req.answer_field else None for r in rows] + [None] * len(null_texts)
    stage1 = prefilter_input(req.prefilter, texts + null_texts, answers)
    parts, summaries, stats = run_corpus_parts(req, plan, queries, fingerprint(req, plan, ident, texts + null_texts),
                                               where, stage1)
    ledger = Ledger.of_parts(summaries, rows_in="records", rows_out="documents", what="semantic corpus part")
    scores, ids = merged_top_k(where, summaries, len(queries), req.top_k)
    ds = decisions(texts + null_texts, answers, scores, ids, chosen_windows(where, ids))
    items, nulls = ds[:len(texts)], ds[len(texts):]
    threshold = threshold_block([d.decision_score for d in nulls] if null_rows is not None else None,
                                req.false_flag_rate, null_info)
    verdicts, judge = [None] * len(ds), None
    if req.judge is not None:
        verdicts, judge = run_judge(req.judge, [r["id"] for r in [*rows, *(null_rows or ())]], texts + null_texts, ds,
                                    len(texts), threshold["threshold"], where)
    out_rows = [semantic_row(r["id"], d, threshold["threshold"], j) for r, d, j in zip(rows, items, verdicts)]
    shown = shown_items(rows, items, threshold["threshold"], verdicts)
    block = {
        **rephrased_share([row["rephrased"] for row in out_rows]), **threshold,
        "embedder": {"name": req.embedder_name, "path": req.embedder, "weights_digest": ident["weights_digest"],
                     "max_tokens": req.max_tokens},
        "verifier": verifier_block(req.answer_field), "judge": judge, "top_k": req.top_k,
        "window": {"size": plan.size, "stride": plan.stride, "contained_span": plan.contained_span, "how": how},
        "prefilter": prefilter_block(stage1, summaries, threshold["threshold"]),
        "counts": {"items": len(texts), "windows": sum(s["windows"] for s in summaries.values()),
                   "windows_cut": sum(s.get("windows_cut", s["windows"]) for s in summaries.values()),
                   "corpus_files": len(parts), "corpus_records": ledger.rows_in, "corpus_documents": ledger.rows_out,
                   "corpus_quarantined": ledger.quarantined, "corpus_reasons": dict(sorted(ledger.reasons.items()))},
        "parts": {k: stats.get(k, 0) for k in ("parts", "reused", "scored", "replans", "nodes_lost")},
        "histogram": histograms(out_rows), "flagged_items": shown[:SHOWN],
        "flagged_items_shown": min(len(shown), SHOWN), "flagged_items_listed": len(shown),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    return SemanticResult(out_rows, block)


def semantic_pass(req: SemanticRequest, null_rows: Sequence[dict] | None, null_bad: Sequence[dict],
                  rows: Sequence[dict], dest, out) -> dict:
    """The semantic pass with its outputs: semantic.parquet (one row per readable benchmark row, checked),
    null_quarantine.parquet (the null's rows in = read + quarantined, checked) and semantic.png (in `out`, the
    job's local directory); returns report.json's `semantic` block with the request's settings."""
    import pyarrow as pa

    from curation.io.ledger import Ledger, quarantine_table
    from scoring.reports.semantic_report import plot_semantic
    from scoring.semantic.decide import SEMANTIC_SCHEMA

    null_info = None
    if null_rows is not None:
        null = Ledger(len(null_rows) + len(null_bad), len(null_rows), reason_counts(null_bad))
        null.check("null benchmark")
        null_info = {"path": req.null_path, "rows_in": null.rows_in, "quarantined": null.quarantined,
                     "reasons": dict(sorted(null.reasons.items()))}
        dest.write_parquet("null_quarantine.parquet", quarantine_table(null_bad))
    res = semantic_overlap(rows, null_rows, null_info, req, dest)
    Ledger(len(rows), len(res.rows), {}).check("semantic rows")  # one row per readable benchmark row
    dest.write_parquet("semantic.parquet", pa.Table.from_pylist(res.rows, schema=SEMANTIC_SCHEMA))
    # the judge's settings are its block's (with the API base redacted: a URL may carry credentials)
    block = {**res.block, "settings": {k: v for k, v in asdict(req).items() if k not in ("corpus", "opts",
                                                                                        "progress", "judge")}}
    (out / "semantic.png").write_bytes(plot_semantic(block))
    return block
