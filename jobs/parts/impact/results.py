"""Per-item evaluation results for `tidemark impact`, read as they are, one Ray task per file (or here on the local
plane): lm-evaluation-harness's `--log_samples` files, or a plain jsonl/Parquet of items with a score.

    lm-evaluation-harness (read as 0.4.13 writes them, tests/fixtures/lm_eval/README.md): OUT/<model>/
    samples_<task>_<date>.jsonl, one line per document and filter: doc_id, doc (the dataset row), target,
    arguments, resps, filtered_resps, filter, metrics (the names of the metric keys that follow), the hashes, and
    one float per metric. The model's name is the run's results_<date>.json `model_name` (the folder name is a
    lossy sanitisation of it); the task is the file name between `samples_` and the last `_`.
    plain: jsonl or Parquet with `id`, `input`, optional `target`, and `score` (0/1 or real); the model and task are
    the file's stem, unless `model` and `task` columns say otherwise.

Every item becomes one row of RESULTS_SCHEMA: model, task, filter, item (the item's id: the doc's own `id` field
where it has one, else its doc_id), doc_id, input and answer keys (a 64-bit hash of the text's lowercased `\\w+`
words: the same words `overlap` matches, so an item is found whatever its spacing or case), and its score. A line
that cannot be read is quarantined with the reason; rows in = items + quarantined, per file.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from curation.io.ledger import quarantine_record, quarantine_table
from scoring.overlap.ngrams import text_key

RESULTS_SCHEMA = pa.schema([("model", pa.string()), ("task", pa.string()), ("filter", pa.string()),
                            ("item", pa.string()), ("doc_id", pa.int64()), ("input_key", pa.uint64()),
                            ("answer_key", pa.uint64()), ("score", pa.float64())])
SAMPLES = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d.\-]+)\.jsonl$")
INPUT_FIELDS = ("question", "input", "text", "query", "prompt", "problem", "sentence", "ctx", "goal", "premise")
ANSWER_FIELDS = ("answer", "target", "solution", "output", "label_text")
STAGE = "results"


def result_files(spec: str) -> list[dict]:
    """One entry per file: lm-evaluation-harness samples files under a directory (with their run's model name), or
    plain jsonl/Parquet files."""
    p = Path(spec)
    if not p.exists():
        raise FileNotFoundError(f"--results {spec} does not exist")
    samples = sorted(p.rglob("samples_*.jsonl")) if p.is_dir() else ([p] if SAMPLES.match(p.name) else [])
    if samples:
        return [{"path": str(f), "kind": "lm_eval", "model": harness_model(f), "task": SAMPLES.match(f.name)["task"]}
                for f in samples if SAMPLES.match(f.name)]
    files = sorted([*p.glob("*.jsonl"), *p.glob("*.parquet")]) if p.is_dir() else [p]
    if not files:
        raise FileNotFoundError(f"--results {spec}: no lm-evaluation-harness samples_*.jsonl, *.jsonl or *.parquet")
    return [{"path": str(f), "kind": "plain", "model": f.stem, "task": f.stem} for f in files]


def harness_model(samples: Path) -> str:
    """The model's name from the run's results_<date>.json beside the samples file (same date); else the folder."""
    date = SAMPLES.match(samples.name)["date"]
    results = samples.with_name(f"results_{date}.json")
    if results.is_file():
        try:
            name = json.loads(results.read_text()).get("model_name")
            if name:
                return str(name)
        except (json.JSONDecodeError, OSError):
            pass
    return samples.parent.name


def pick(doc: dict, fields, asked: str | None):
    if asked:
        return doc.get(asked)
    return next((doc[f] for f in fields if isinstance(doc.get(f), str)), None)


def harness_rows(entry: dict, settings: dict) -> tuple[list[dict], list[dict], dict]:
    """(items, quarantined, facts) of one samples file: one item per doc_id, for the chosen filter and metric."""
    lines, bad = [], []
    with open(entry["path"], "rb") as fh:
        for n, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            rid = f"{entry['task']}:line{n}"
            try:
                lines.append(json.loads(raw))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                bad.append(quarantine_record(rid, STAGE, "bad_json", str(exc)[:200]))
    filters = list(dict.fromkeys(str(x.get("filter", "none")) for x in lines))
    chosen = settings.get("filter") or next((f for f in filters if f != "none"), filters[0] if filters else "none")
    rows = []
    for x in lines:
        if str(x.get("filter", "none")) != chosen:
            continue  # another filter's line of the same doc: counted in `facts`, not an item
        rows.append(_harness_item(x, entry, chosen, settings, bad))
    rows = [r for r in rows if r is not None]
    facts = {"filters": filters, "filter": chosen, "lines": len(lines) + len(bad),
             "other_filter_lines": sum(str(x.get("filter", "none")) != chosen for x in lines)}
    return rows, bad, facts


def _harness_item(x: dict, entry: dict, chosen: str, settings: dict, bad: list) -> dict | None:
    doc = x.get("doc") if isinstance(x.get("doc"), dict) else {}
    doc_id = x.get("doc_id")
    rid = str(doc.get("id") if doc.get("id") is not None else doc_id)
    metric = settings.get("metric") or next(iter(x.get("metrics") or []), None)
    score = x.get(metric) if metric else None
    if not isinstance(doc_id, int) or not isinstance(score, (int, float)) or isinstance(score, bool):
        bad.append(quarantine_record(f"{entry['task']}:{rid}", STAGE, "no_score",
                                     f"doc_id={doc_id!r} metric={metric!r} value={score!r}"))
        return None
    prompt = ((x.get("arguments") or {}).get("gen_args_0") or {}).get("arg_0")
    text = pick(doc, INPUT_FIELDS, settings.get("input_field")) or prompt
    answer = pick(doc, ANSWER_FIELDS, settings.get("answer_field")) or x.get("target")
    return {"model": entry["model"], "task": entry["task"], "filter": chosen, "item": rid, "doc_id": doc_id,
            "input_key": text_key(text), "answer_key": text_key(answer), "score": float(score), "metric": metric}


def plain_rows(entry: dict, settings: dict) -> tuple[list[dict], list[dict], dict]:
    from jobs.plane.benchmark_reader import jsonl_objects

    path = Path(entry["path"])
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        objs = [(str(r.get("id") or f"{path.stem}:{k}"), r, None)
                for k, r in enumerate(pq.read_table(path).to_pylist(), start=1)]
    else:
        objs = list(jsonl_objects(path))
    rows, bad = [], []
    for k, (rid, raw, problem) in enumerate(objs):
        if problem:
            bad.append(quarantine_record(rid, STAGE, *problem))
            continue
        score = raw.get("score")
        if not isinstance(score, (int, float)) or isinstance(score, bool) or score != score:
            bad.append(quarantine_record(rid, STAGE, "no_score", f"score={score!r}"))
            continue
        text = raw.get(settings.get("input_field") or "input", raw.get("text"))
        rows.append({"model": str(raw.get("model") or entry["model"]), "task": str(raw.get("task") or entry["task"]),
                     "filter": None, "item": rid, "doc_id": k, "input_key": text_key(text),
                     "answer_key": text_key(raw.get(settings.get("answer_field") or "target")),
                     "score": float(score), "metric": "score"})
    return rows, bad, {"lines": len(objs)}


def read_file(shared: dict, entry: dict) -> dict:
    """One results file (Ray-free): its items as Arrow IPC bytes, its quarantine and facts."""
    from jobs.plane.scoring_pool import to_ipc

    read = harness_rows if entry["kind"] == "lm_eval" else plain_rows
    rows, bad, facts = read(entry, shared)
    for q in bad:
        q["detail"] = f"{Path(entry['path']).name}: {q['detail']}"[:300]
    metric = sorted({r.pop("metric") for r in rows if r.get("metric")})
    return {"entry": entry, "items": to_ipc(pa.Table.from_pylist(rows, schema=RESULTS_SCHEMA)),
            "quarantine": to_ipc(quarantine_table(bad)), "facts": {**facts, "metric": metric},
            "rows_in": len(rows) + len(bad)}


def read_results(specs: list[str], settings: dict, *, runner, progress: bool = True) -> tuple[pa.Table, pa.Table, list]:
    """(items, quarantine, per-file facts) of every results file of `specs`. Duplicate (model, task, item) rows are
    quarantined (the first kept), so that every item is counted once."""
    from curation.io.ledger import first_occurrences
    from jobs.plane.scoring_pool import from_ipc

    entries = [e for s in specs for e in result_files(s)]
    done = sorted(runner.map(read_file, [{"entry": e} for e in entries], settings, desc="results (reading)",
                             progress=progress, num_cpus=0.5), key=lambda d: d["entry"]["path"])
    items = pa.concat_tables([from_ipc(d["items"]) for d in done]) if done else RESULTS_SCHEMA.empty_table()
    quarantine = pa.concat_tables([from_ipc(d["quarantine"]) for d in done]) if done else quarantine_table([])
    key = pa.array([f"{m}\x00{t}\x00{i}" for m, t, i in zip(*(items.column(c).to_pylist()
                                                             for c in ("model", "task", "item")))])
    first = pa.array(first_occurrences(key)) if len(key) else pa.array([], pa.bool_())
    dupes = items.filter(pc.invert(first))
    if dupes.num_rows:
        extra = [quarantine_record(f"{m}:{t}:{i}", STAGE, "duplicate_item", "an earlier line has the same item")
                 for m, t, i in zip(*(dupes.column(c).to_pylist() for c in ("model", "task", "item")))]
        quarantine = pa.concat_tables([quarantine, quarantine_table(extra)])
        items = items.filter(first)
    return items, quarantine, [{**d["entry"], **d["facts"], "rows_in": d["rows_in"]} for d in done]
