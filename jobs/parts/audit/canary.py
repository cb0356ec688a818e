"""`tidemark canary test`'s run: load the canary sets (refusing an edited or malformed one before anything is
scored), score every canary with the one detector on the shared scoring pool (jobs/plane/part_loop.py, as every
scoring job), and run the rank test per set on the score column (scoring/audits/canary.py). Outputs in OUT:
scores.parquet (set, id, role, score), report.json, report.md, report.html with scores.png, the pool's parts and
quarantine under scoring/, and _SUCCESS. A canary set is small (its texts are held by the driver, as the unlearning
audit's chunks are); the model's forward passes are what runs on the workers.
"""
from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import numpy as np

from curation.canary import CanaryError, load_canaries
from jobs.plane.runners import RAY

ROLE_LABEL = {"plant": 1, "holdout": 0}  # the pool's label column carries the role (1 = planted)
LABEL_ROLE = {label: role for role, label in ROLE_LABEL.items()}


def load_sets(dirs: list[str]) -> dict[str, tuple[list[dict], dict]]:
    """{set name: (canaries, manifest)} for each directory, named by its folder (made unique with -2, -3 …).
    Refuses the same set twice: Fisher's combination needs independent sets, and a set given twice would count
    its evidence twice."""
    sets, digests = {}, {}
    for d in dirs:
        rows, manifest = load_canaries(Path(d))
        digest = manifest["canaries_sha256"]
        if digest in digests:
            raise CanaryError(f"{d} is the same canary set as {digests[digest]} (sha256 {digest[:12]}...): each set "
                              "may be tested once, or the combined p-value would count its evidence twice")
        digests[digest] = d
        base = Path(d).resolve().name or "canaries"
        name, k = base, 2
        while name in sets:
            name, k = f"{base}-{k}", k + 1
        sets[name] = (rows, {**manifest, "path": str(d)})
    return sets


def staging_rows(sets: dict[str, tuple[list[dict], dict]]) -> bytes:
    """The canaries as the benchmark the pool reads: id `set/canary id`, the role as the label, the set as bucket."""
    return "".join(json.dumps({"id": f"{name}/{c['id']}", "input": c["text"], "label": ROLE_LABEL[c["role"]],
                               "bucket": name}, ensure_ascii=False) + "\n"
                   for name, (rows, _) in sets.items() for c in rows).encode("utf-8")


def run_canary_test(cfg) -> dict:
    """cfg: jobs/commands/canary.CanaryTestConfig. Returns the paths and the p-value for the command to print."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from curation.io.outputs import Location
    from jobs.kit.log import PhaseClock
    from jobs.kit.identity import json_digest, model_identity, open_output, publish, tool_version
    from jobs.kit.report_out import write_html
    from jobs.kit.runtime import start_driver
    from jobs.kit.served_model import run_record
    from jobs.plane.part_loop import score_benchmark
    from jobs.plane.part_store import read_parts
    from jobs.plane.scoring_pool import ModelBranch
    from scoring.audits.canary import MEANING, canary_test
    from scoring.reports.canary_page import plot_scores, report_markdown, report_page

    t0 = time.perf_counter()
    phases = PhaseClock()
    sets = load_sets(cfg.canaries)  # refusals first: nothing is scored for a set that cannot be tested
    cfg.method()  # a detector the test cannot use is refused before the served model is probed
    served = cfg.served()
    method = cfg.method(served)
    views = ("original", *[v for v in method.needs if v not in ("original", "ref", "token_freq")])
    dest, out = open_output(cfg.out)
    phases.lap("load")
    start_driver()
    dest.write_bytes("_staging/canaries.jsonl", staging_rows(sets))
    branches = [served.branch(views) if served else ModelBranch(cfg.model, views)]
    if cfg.ref_model:
        branches.append(ModelBranch(cfg.ref_model, ("original",), rename_original="ref"))
    identity = {"model": served.identity() if served else model_identity(cfg.model),
                "ref_model": model_identity(cfg.ref_model), "detector": method.column, "views": list(views),
                "sets": {n: m["canaries_sha256"] for n, (_, m) in sets.items()}, "tool": tool_version()}
    scoring = Location(dest.child("scoring"))
    run = score_benchmark(
        benchmark=dest.child("_staging/canaries.jsonl"), requester_pays=False, rows_per_part=cfg.shard_size,
        dest=scoring, spec=cfg.pool_spec(branches), runner=RAY, methods=[method], seed=0,
        count_tokens_of=cfg.tokenizer_path if "token_freq" in method.needs else None,
        fingerprint_for=lambda *_: json_digest(identity), progress=cfg.progress)
    run.ledger.check("canary scoring")
    phases.lap("score (workers)")
    table = read_parts(scoring, "scores.parquet", ["id", "label", "bucket", method.column])
    if table is None:
        raise RuntimeError(f"no canary could be scored; see {scoring.child('quarantine.parquet')}")
    table = table.take(pc.sort_indices(table, [("id", "ascending")]))
    score = table.column(method.column).to_numpy(zero_copy_only=False).astype(np.float64)
    set_of = np.asarray(table.column("bucket").to_pylist())
    label = table.column("label").to_numpy()
    scores = pa.table({"set": set_of.tolist(), "id": [i.split("/", 1)[1] for i in table.column("id").to_pylist()],
                       "role": [LABEL_ROLE[x] for x in label.tolist()], "score": score})
    pq.write_table(scores, out / "scores.parquet")
    try:
        res = canary_test({n: (score[(set_of == n) & (label == 1)], score[(set_of == n) & (label == 0)])
                           for n in sets})
    except ValueError as exc:
        raise RuntimeError(f"canary test: {exc} (scored canaries per role are in {out / 'scores.parquet'})") from None
    phases.lap("test")
    q = read_parts(scoring, "quarantine.parquet", ["id"])
    unscored = Counter(i.split("/", 1)[0] for i in (q.column("id").to_pylist() if q is not None else []))
    for name, r in res["sets"].items():
        rows, manifest = sets[name]
        r.update({"path": manifest["path"], "canaries_sha256": manifest["canaries_sha256"], "n": len(rows),
                  "unscored": unscored[name],
                  "made_with": {k: manifest.get(k) for k in ("generator", "seed", "words", "plant_share", "tool")}})
    report = {
        "p_value": res["p_value"], "conclusion": res["conclusion"], "meaning": MEANING,
        "test": "one-sided Mann-Whitney U: planted canaries score higher than held-out ones",
        "combination": res["combined"], "sets": res["sets"], "detector": method.column,
        "model": cfg.model, "model_identity": identity["model"], "ref_model": cfg.ref_model,
        "served_model": run_record(served, run.stats.get("api")),
        "counts": {"in": run.ledger.rows_in, "scored": run.ledger.rows_out, "quarantined": run.ledger.quarantined,
                   "reasons": dict(run.ledger.reasons)},
        "config": asdict(cfg), "tool": tool_version(), "seconds": round(time.perf_counter() - t0, 2),
        "phases_s": phases.laps,
    }
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float))
    (out / "scores.png").write_bytes(plot_scores(scores, res))
    (out / "report.md").write_text(report_markdown(report))
    write_html(out, report_page(report, out))
    dest.delete_tree("_staging")
    publish(dest, out, {"job": "canary-test", "p_value": res["p_value"]})
    return {"report": str(out / "report.md"), "json": str(out / "report.json"), "p_value": res["p_value"],
            "seconds": report["seconds"]}
