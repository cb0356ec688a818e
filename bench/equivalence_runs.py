"""The runs of bench/plane_equivalence.py that exercise jobs/parts' rooms (issue 56, part 3: every module of
jobs/parts moved into a room by capability, "no module's behaviour changed"), and the fixtures they read.

Each run is one CLI command of the tree under test; `--out` is added by the harness (ROOT/NAME). A run that reads
an earlier run's output names that run's directory under the same ROOT, so the runs are listed in the order they
must go: `index-corpus` before `overlap-index` and `trace-*`, `overlap` (plane_equivalence's) before `impact`,
`canary-make` before `canary-test`.

| run | rooms it goes through |
|---|---|
| index-corpus | index/build (the corpus in 3 files, 3 parts, shards of at most 1,024 tokens), overlap/corpus_scan |
| overlap-index | index/reader, index/search, index/query |
| trace-local, trace-ray | trace/inputs, trace/index_rounds, trace/tables (in one process, and on Ray in chunks) |
| impact | impact/results, impact/evidence (overlap's and evaluate-local's OUT), impact/join, impact/records |
| paraphrase | release/paraphrased (WordNet 3.0, seed 0) |
| audit-documents | doc_inputs, audit/snippets, audit/results, audit/accounting, audit/reference_overlap |
| audit-benchmark | the same in benchmark mode (a labelled calibration set, a reference corpus) |
| cutoff | cutoff/dated_rows, cutoff/scoring (local runner) |
| canary-make, canary-test | audit/canary |
| doc-mia | doc_inputs, doc_mia/documents, doc_mia/grid |
| dataset-inference | the Maini et al. test (its scoring on the plane, local runner) |
| dataset-inference-codec | audit/codec (local runner) |

build-benchmark (plane_equivalence's) goes through release/build, parsed_shards, dedup_tasks; evaluate-text-only
through text_only/generation and text_only/evaluation; evaluate-local's `--ref-corpus` through
curation/io/corpus_files.iter_texts (reference_corpus.iter_texts before the move).
"""
from __future__ import annotations

import json
import re
from pathlib import Path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def make_room_fixtures(d: Path, rows: list[dict]) -> None:
    """The inputs of the rooms' runs, beside plane_equivalence's (whose files these leave as they are). `rows`: the
    48 benchmark passages (rows[:12] are the corpus's doc0..doc11)."""
    from bench.workspace import passages

    docs = [json.loads(x) for x in (d / "corpus" / "part0.jsonl").read_text().splitlines()]
    for k in range(3):  # the same 30 documents in 3 files: 3 parts for index-corpus
        write_jsonl(d / "corpus_split" / f"part{k}.jsonl", docs[k * 10:(k + 1) * 10])
    # texts to trace: 4 corpus documents' passages, 3 others, one half copied and half not, one with no words
    texts = [{"id": f"t{k}", "text": rows[k]["text"]} for k in range(4)]
    texts += [{"id": f"u{k}", "text": rows[k]["text"]} for k in (30, 31, 32)]
    half = rows[5]["text"].split()[:32] + rows[40]["text"].split()[32:]
    texts += [{"id": "mixed", "text": " ".join(half)}, {"id": "blank", "text": "   "}]
    write_jsonl(d / "texts.jsonl", texts)
    # per-item results of a harness: id, input, a 0/1 score (every third item wrong)
    write_jsonl(d / "results.jsonl", [{"id": r["id"], "input": r["text"], "score": int(k % 3 != 0)}
                                      for k, r in enumerate(rows)])
    # documents for the audit and doc-mia: 18 .txt documents of 4 passages each, 6 per folder
    more = passages(72, words=64, seed=11)
    for f, folder in enumerate(("target", "members", "nonmembers")):
        (d / "docs" / folder).mkdir(parents=True, exist_ok=True)
        for k in range(6):
            chunk = more[(f * 6 + k) * 4:(f * 6 + k + 1) * 4]
            (d / "docs" / folder / f"{folder}{k}.txt").write_text("\n\n".join(p["text"] for p in chunk) + "\n")
    (d / "docs" / "target" / "empty.txt").write_text("  \n")  # quarantined, not lost
    # a labelled calibration set for the benchmark audit; member and non-member sets for dataset inference
    cal = passages(24, words=64, seed=13)
    write_jsonl(d / "calibration.jsonl", [{"id": p["id"], "input": p["text"], "label": k % 2}
                                          for k, p in enumerate(cal)])
    sets = passages(40, words=48, seed=5)
    write_jsonl(d / "suspect.jsonl", [{"id": p["id"], "text": p["text"]} for p in sets[:20]])
    write_jsonl(d / "validation.jsonl", [{"id": p["id"], "text": p["text"]} for p in sets[20:]])
    # dated texts: two sources, 12 months, 4 a month each; three rows the cutoff quarantines
    dated = passages(96, words=32, seed=7)
    out = [{"id": p["id"], "text": p["text"], "date": f"2020-{k // 8 + 1:02d}-{k % 8 + 1:02d}",
            "source": "ab"[k % 2]} for k, p in enumerate(dated)]
    out += [{"id": "bad-date", "text": "a text", "date": "sometime in 2020", "source": "a"},
            {"id": "empty", "text": "", "date": "2020-05", "source": "a"},
            {"id": "early", "text": "a text from before the range", "date": "2018-01-01", "source": "b"}]
    write_jsonl(d / "dated.jsonl", out)


def room_runs(fx: Path, root: Path) -> dict[str, list[str]]:
    """The rooms' runs (after plane_equivalence's own, whose outputs `impact` reads); root: the runs' folder."""
    model, bench = str(fx / "model" / "tiny-gpt2"), str(fx / "bench.jsonl")
    docs, index = fx / "docs", str(root / "index-corpus")
    trace = ["trace", "--index", index, "--texts", str(fx / "texts.jsonl"), "--min-words", "6", "--docs-per-span",
             "3", "--context-words", "10", "--quiet"]
    return {
        "index-corpus": ["index-corpus", "--corpus", str(fx / "corpus_split"), "--part-bytes", "4000",
                         "--max-shard-tokens", "1024", "--quiet"],
        "overlap-index": ["overlap", "--benchmark", bench, "--index", index, "--quiet"],
        "trace-local": [*trace, "--runner", "local"],
        "trace-ray": [*trace, "--runner", "ray", "--batch-texts", "3", "--chunk-texts", "5"],
        "impact": ["impact", "--results", str(fx / "results.jsonl"), "--evidence", str(root / "overlap"),
                   "--evidence", str(root / "evaluate-local"), "--bootstrap", "200", "--permutations", "999",
                   "--constat-bootstrap", "100", "--runner", "local", "--quiet"],
        "paraphrase": ["paraphrase", "--benchmark", bench, "--rate", "0.3", "--rewriter", "wordnet", "--seed", "0",
                       "--shard-size", "20", "--actors", "2", "--quiet"],
        "audit-documents": ["audit", "--target", str(docs / "target"), "--calib-members", str(docs / "members"),
                            "--calib-nonmembers", str(docs / "nonmembers"), "--model", model, "--snippets", "4",
                            "--snippet-words", "32", "--n-bootstrap", "200", "--reference-corpus",
                            str(fx / "corpus"), "--batch-size", "16", "--quiet"],
        "audit-benchmark": ["audit", "--target", bench, "--calibration", str(fx / "calibration.jsonl"), "--model",
                            model, "--reference-corpus", str(fx / "corpus"), "--n-bootstrap", "200", "--batch-size",
                            "16", "--quiet"],
        "cutoff": ["cutoff", "--texts", str(fx / "dated.jsonl"), "--model", model, "--months", "2020-01..2020-12",
                   "--methods", "loss,min_k_pp", "--permutations", "199", "--bootstrap", "100", "--shard-size",
                   "40", "--runner", "local", "--quiet"],
        "canary-make": ["canary", "make", "--n", "16", "--seed", "0", "--words", "12"],
        "canary-test": ["canary", "test", "--canaries", str(root / "canary-make"), "--model", model, "--quiet"],
        "doc-mia": ["doc-mia", "--members", str(docs / "members"), "--nonmembers", str(docs / "nonmembers"),
                    "--model", model, "--contexts", "32,64", "--folds", "3", "--n-trees", "20", "--hist-bins", "50",
                    "--batch-size", "16", "--quiet"],
        "dataset-inference": ["dataset-inference", "--suspect", str(fx / "suspect.jsonl"), "--validation",
                              str(fx / "validation.jsonl"), "--model", model, "--allow-shift", "--shard-size", "10",
                              "--runner", "local", "--quiet"],
        "dataset-inference-codec": ["dataset-inference", "--method", "codec", "--suspect", str(fx / "suspect.jsonl"),
                                    "--model", model, "--shots", "2", "--runner", "local", "--quiet"],
    }


# jobs/parts' modules before issue 56's rooms -> after (4e90640): `compare` reads a string that names an old module
# (a path like jobs/parts/corpus_index.pack_texts, or jobs.parts.corpus_index) as the new module's name, so that a
# report printing where a function lives is not a difference. Nothing else is rewritten: a digest made from such a
# string still differs (and is reported).
MOVED = {
    "audit_accounting": "audit/accounting", "audit_results": "audit/results", "audit_snippets": "audit/snippets",
    "reference_overlap": "audit/reference_overlap", "codec_inference": "audit/codec",
    "canary_scoring": "audit/canary", "cutoff_scoring": "cutoff/scoring", "dated_rows": "cutoff/dated_rows",
    "documents": "doc_mia/documents", "doc_mia_grid": "doc_mia/grid", "impact_evidence": "impact/evidence",
    "impact_join": "impact/join", "impact_records": "impact/records", "impact_results": "impact/results",
    "corpus_index": "index/build", "index_reader": "index/reader", "index_search": "index/search",
    "index_query": "index/query", "corpus_overlap": "overlap/corpus_scan", "dedup_tasks": "release/dedup_tasks",
    "parsed_shards": "release/parsed_shards", "training_overlap": "release/training_overlap",
    "paraphrased": "release/paraphrased", "release_build": "release/build",
    "generation_parts": "text_only/generation", "text_only_evaluation": "text_only/evaluation",
    "trace_index": "trace/index_rounds", "trace_inputs": "trace/inputs", "trace_tables": "trace/tables",
}
_MOVED = re.compile(r"\bjobs([./])parts\1(" + "|".join(sorted(MOVED, key=len, reverse=True)) + r")\b")


def new_module_names(text: str) -> str:
    """`text` with every old jobs/parts module's name written as its room's (in the separator it was written in)."""
    return _MOVED.sub(lambda m: f"jobs{m[1]}parts{m[1]}{MOVED[m[2]].replace('/', m[1])}", text)
