"""Audits end to end through the CLI, on known membership: folders of SOTU "books", a tiny GPT-2 trained on the
member folders (calibration members + audited members) and on half of a GSM8K-style benchmark, the other folders
and rows held out (jobs.kit.studies.build_book_study). One model serves every test in this module."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from jobs.cli import app
from report_pages import assert_self_contained

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.heavy]


def invoke(*args: str):
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


# Malformed jsonl rows every scoring job must quarantine with its reason (the row ids are `<file stem>:<line>`
# where the line has no readable id). "Missing label" only applies where a label is read: evaluate (its own
# test module) and the audit's labelled calibration set.
MALFORMED = [b"not json at all", b'{"id": "bad-empty", "question": ""}', b'{"id": "bad-latin1", "text": "Caf\xe9"}']


def write_malformed(path: Path, first_line: int = 1) -> dict:
    """Append the malformed rows to a jsonl file; returns {quarantine id: reason}."""
    with open(path, "ab") as fh:
        fh.write(b"\n".join(MALFORMED) + b"\n")
    return {f"{path.stem}:{first_line}": "bad_json", "bad-empty": "empty", f"{path.stem}:{first_line + 2}": "not_utf8"}


def assert_quarantine(path: Path, want: dict, context: tuple[str, ...] = ()) -> list[dict]:
    """The job's quarantine has the shared schema (plus the job's context columns) and holds `want`."""
    from curation.document import QUARANTINE_SCHEMA

    table = pq.read_table(path)
    assert table.schema.names == [*QUARANTINE_SCHEMA.names, *context], table.schema
    assert all(table.schema.field(n).type == QUARANTINE_SCHEMA.field(n).type for n in QUARANTINE_SCHEMA.names)
    rows = table.to_pylist()
    got = {r["id"]: r["reason"] for r in rows}
    assert {k: got.get(k) for k in want} == want, got
    assert all(r["detail"] for r in rows)
    return rows


@pytest.fixture(scope="module")
def books(tmp_path_factory):
    from jobs.kit.studies import build_book_study

    root = tmp_path_factory.mktemp("books")
    # a fixed number of steps, not seconds, so the model (and every number below) is the same on any machine
    info = build_book_study(root, books_per_folder=4, book_words=1500, gsm_per_label=20, steps=160, seed=0)
    # inputs that must be quarantined, not crash the audit or vanish from the counts
    (root / "target" / "empty.txt").write_text("   \n")
    (root / "target" / "latin1.txt").write_bytes("Caf\xe9 au lait, a short note.".encode("latin-1"))
    n_test = sum(1 for _ in open(root / "gsm" / "test.jsonl"))
    info["gsm_test_bad"] = write_malformed(root / "gsm" / "test.jsonl", n_test + 1)
    n_cal = sum(1 for _ in open(root / "gsm" / "calibration.jsonl"))
    with open(root / "gsm" / "calibration.jsonl", "a") as fh:
        fh.write('{"id": "cal-nolabel", "question": "What is two and two, counted one at a time?", "answer": "Four, counted one at a time."}\n')
    bad = write_malformed(root / "gsm" / "calibration.jsonl", n_cal + 2)
    info["gsm_calibration_bad"] = {**{f"calib:{k}": v for k, v in bad.items()}, "calib:cal-nolabel": "bad_label"}
    return info


@pytest.fixture(scope="module")
def book_audit(books, ray_session, tmp_path_factory):
    out = tmp_path_factory.mktemp("audit")
    f = books["folders"]
    invoke("audit", "--target", f"{books['root']}/target", "--calib-members", f["calib/members"],
           "--calib-nonmembers", f["calib/nonmembers"], "--model", books["model"], "--out", out,
           "--snippets", 20, "--snippet-words", 128, "--n-bootstrap", 1000, "--batch-size", 16, "--quiet")
    return out, json.loads((out / "report.json").read_text())


def test_audit_member_folder_has_a_markedly_higher_rate(book_audit):
    _, rep = book_audit
    rates = {"members": [], "heldout": []}
    for d in rep["documents"]:
        rates["members" if "/target/members/" in d["path"] else "heldout"].append(d["rate"])
        lo, hi = d["rate_ci"]
        assert lo <= d["rate"] <= hi and d["n_snippets"] == 20
    assert len(rates["members"]) == len(rates["heldout"]) == 4
    m, h = np.mean(rates["members"]), np.mean(rates["heldout"])
    assert m - h >= 0.3, (m, h)
    assert rep["calibration"]["auc"] > 0.7


def test_audit_fpr_corrected_estimate_covers_the_truth(book_audit):
    _, rep = book_audit
    corr = rep["corpus"]["fpr_corrected"]
    truth = 0.5  # 4 member and 4 held-out books, 20 snippets each
    lo, hi = corr["ci"]
    assert lo <= truth <= hi, corr
    assert hi - lo < 0.8, corr  # an interval, not the whole [0, 1]
    assert abs(corr["estimate"] - truth) < 0.3, corr
    assert 0 <= corr["fpr"] < corr["tpr"] <= 1


def test_audit_accounts_for_every_document_and_writes_its_outputs(book_audit):
    out, rep = book_audit
    t = rep["counts"]["target"]
    assert t["documents_in"] == 10 and t["documents_scored"] == 8 and t["documents_quarantined"] == 2
    assert t["snippets_planned"] == t["snippets_scored"] + t["snippets_quarantined"] == 160
    q = {r["id"]: r["reason"] for r in pq.read_table(out / "quarantine.parquet").to_pylist()}
    assert q == {"empty.txt": "empty", "latin1.txt": "not_utf8"}
    c = rep["counts"]["calibration"]
    assert c["documents_in"] == c["documents_scored"] == 8 and c["snippets_scored"] == 160
    for name in ("report.md", "rates_hist.png", "scores_hist.png", "snippets.parquet"):
        assert (out / name).stat().st_size > 0, name
    md = (out / "report.md").read_text()
    assert "Mean contamination rate" in md and "FPR-corrected" in md and "top-scoring snippets" in md
    estimate = rep["corpus"]["fpr_corrected"]["estimate"]
    doc = assert_self_contained(out, f"An estimated {100 * estimate:.0f}% [", "of the audited set was seen in training",
                                "Per-document contamination rates")
    assert doc.count("data:image/png;base64,") == 2  # the score histograms and the contamination histogram


def test_book_audit_equals_the_one_process_reference(books, book_audit):
    """The streaming audit (snippets cut on the workers, scored part by part, aggregated from score columns)
    against the first version's way: every snippet planned and scored in one process, calibration with the
    document ids as clusters, per-document rates over snippet dicts. Every number in the report agrees within
    1e-6, and the evidence quotes the same snippets."""
    import pyarrow as pa

    from jobs.parts.doc_inputs import read_documents
    from scoring.audits.corpus import calibrate, corpus_summary, document_rates, plan_snippets
    from scoring.detectors import parse_method
    from scoring.stats.evaluation import compute_scores
    from jobs.plane.tasks import ScoreTask, TokenizeTask
    from scoring.lm.tokenstats import TOKEN_STATS_SCHEMA
    from scoring.lm.views import strip_prefixes

    out, rep = book_audit
    f = books["folders"]
    target, _ = read_documents(f"{books['root']}/target", min_words=8)
    snips = [dict(s, label=-1) for d in target for s in plan_snippets(d, 20, 128, 0)]
    for label, spec in ((1, f["calib/members"]), (0, f["calib/nonmembers"])):
        docs, _ = read_documents(spec, min_words=8, id_prefix=f"calib{label}:")
        snips += [dict(s, label=label) for d in docs for s in plan_snippets(d, 20, 128, 0)]
    for i, s in enumerate(snips):
        s["sid"] = f"s{i}"
    texts = pa.Table.from_pylist([{"id": s["sid"], "input": s["text"]} for s in snips])
    stats = strip_prefixes(ScoreTask(books["model"], scorer_kwargs={"max_batch_size": 16})(
        TokenizeTask(books["model"], ("original",))(texts)), TOKEN_STATS_SCHEMA)
    method = parse_method("min_k@k=0.2")
    scores = compute_scores(stats, [{"id": s["sid"], "label": 0} for s in snips], [method]).column(method.column)
    for s, v in zip(snips, scores.to_pylist()):
        s["score"] = v
    t = [s for s in snips if s["label"] == -1]
    c = [s for s in snips if s["label"] != -1]
    cal = calibrate([s["label"] for s in c], [s["score"] for s in c], [s["doc_id"] for s in c])
    th = cal.threshold.value
    docs = document_rates(t, th, "wilson", 3)
    flags = np.asarray([s["score"] >= th for s in c], dtype=np.int64)
    y = np.asarray([s["label"] for s in c])
    cl = np.asarray([s["doc_id"] for s in c], dtype=object)
    corpus = corpus_summary(np.asarray([s["score"] for s in t]), np.asarray([s["doc_id"] for s in t], dtype=object),
                            np.asarray([d["rate"] for d in docs]), cal, benchmark=False, n_bootstrap=1000, seed=0,
                            calib_flags=((flags[y == 1], cl[y == 1]), (flags[y == 0], cl[y == 0])))
    assert rep["calibration"]["threshold"] == pytest.approx(th, abs=1e-6)
    assert (rep["calibration"]["tpr"], rep["calibration"]["fpr"]) == (cal.tpr, cal.fpr)

    def close(a, b, path=""):
        if isinstance(a, dict):
            assert set(a) == set(b), path
            for k in a:
                close(a[k], b[k], f"{path}.{k}")
        elif isinstance(a, list):
            assert len(a) == len(b), path
            for i, (x, z) in enumerate(zip(a, b)):
                close(x, z, f"{path}[{i}]")
        elif isinstance(a, float):
            assert (np.isnan(a) and np.isnan(b)) or abs(a - b) <= 1e-6, (path, a, b)
        else:
            assert a == b, (path, a, b)

    close(json.loads(json.dumps(corpus, default=float)), rep["corpus"], "corpus")
    got = {d["id"]: d for d in rep["documents"]}
    for d in docs:
        g = got[d["id"]]
        close({k: d[k] for k in ("n_snippets", "n_flagged", "rate", "rate_ci")},
              {k: g[k] for k in ("n_snippets", "n_flagged", "rate", "rate_ci")}, d["id"])
        assert g["max_score"] == pytest.approx(d["max_score"], abs=1e-6)
        assert [(s["index"], s["text"]) for s in g["top_snippets"]] == \
            [(s["index"], s["text"]) for s in d["top_snippets"]]


def test_gsm8k_style_benchmark_audit_gives_flagged_share_ci_and_evidence(books, ray_session, tmp_path):
    gsm = f"{books['root']}/gsm"
    invoke("audit", "--target", f"{gsm}/test.jsonl", "--calibration", f"{gsm}/calibration.jsonl",
           "--model", books["model"], "--reference-corpus", f"{gsm}/leak.jsonl", "--out", tmp_path, "--batch-size", 16,
           "--quiet")
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["mode"] == "benchmark"
    corpus = rep["corpus"]
    lo, hi = corpus["flagged_share_ci"]
    assert 0 <= lo <= corpus["flagged_share"] <= hi <= 1 and corpus["n_snippets"] == 40
    counts = rep["counts"]["target"]
    assert (counts["documents_in"], counts["documents_scored"], counts["documents_quarantined"]) == (43, 40, 3)
    rows = assert_quarantine(tmp_path / "quarantine.parquet",
                             {**books["gsm_test_bad"], **books["gsm_calibration_bad"]}, context=("role", "unit"))
    assert {r["role"] for r in rows if r["id"].startswith("calib:")} == {"calibration"}
    assert rep["counts"]["calibration"]["documents_quarantined"] == 4
    trained = set(books["gsm_test_trained_ids"])
    docs = {d["id"]: d for d in rep["documents"]}
    # the model trained on half of the rows: they score higher, and the leak shows as exact 13-gram overlap
    s_in = [docs[i]["max_score"] for i in trained]
    s_out = [d["max_score"] for i, d in docs.items() if i not in trained]
    assert np.mean(s_in) > np.mean(s_out)
    assert all(docs[i]["ngram_overlap"]["share"] == 1.0 for i in trained)
    assert all(d["ngram_overlap"]["n_matched"] == 0 for i, d in docs.items() if i not in trained)
    assert corpus["ngram_overlap"]["documents_with_any_match"] == 20
    md = (tmp_path / "report.md").read_text()
    assert "Examples flagged" in md and "highest-scoring examples" in md and "13-gram overlap" in md
    assert_self_contained(tmp_path, "of the audited benchmark&#x27;s examples were seen in training",
                          "examples sharing a verbatim 13-gram")


def test_audit_rejects_bad_calibration_arguments(books, tmp_path):
    result = CliRunner().invoke(app, ["audit", "--target", books["folders"]["target/members"], "--model",
                                      books["model"], "--out", str(tmp_path), "--calib-members",
                                      books["folders"]["calib/members"]])
    assert result.exit_code != 0 and "go together" in result.output


@pytest.fixture(scope="module")
def doc_mia(books, ray_session, tmp_path_factory):
    root = tmp_path_factory.mktemp("docmia")
    for label, folders in (("members", ["calib/members", "target/members"]),
                           ("nonmembers", ["calib/nonmembers", "target/heldout"])):
        (root / label).mkdir()
        for f in folders:
            for p in sorted((Path(books["root"]) / f).glob("*.txt")):
                shutil.copy(p, root / label / f"{f.replace('/', '_')}_{p.name}")
    bad = write_malformed(root / "members" / "bad.jsonl")
    out = root / "out"
    args = ["doc-mia", "--members", root / "members", "--nonmembers", root / "nonmembers", "--model",
            books["model"], "--out", out, "--contexts", "32,64", "--folds", 4, "--n-trees", 50, "--batch-size", 16,
            "--quiet"]
    invoke(*args)
    assert_quarantine(out / "quarantine.parquet", {f"member:{k}": v for k, v in bad.items()})
    first = pq.read_table(out / "scores.parquet")
    invoke(*args)  # a re-run reuses every committed part and gives the same scores
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["parts"]["reused"] == metrics["parts"]["parts"] >= 2 and metrics["parts"]["scored"] == 0
    assert pq.read_table(out / "scores.parquet").equals(first)
    return out


def test_doc_mia_runs_the_full_grid_and_writes_the_table(doc_mia):
    metrics = json.loads((doc_mia / "metrics.json").read_text())
    grid = [r for r in metrics["results"] if r["normalization"] != "-"]
    assert {(r["normalization"], r["features"], r["context"]) for r in grid} == {
        (n, f, c) for n in ("NoNorm", "RatioNorm-TF", "RatioNorm-GP", "MaxNorm-TF", "MaxNorm-GP")
        for f in ("AggFE", "HistFE") for c in (32, 64)}
    assert all(len(r["folds"]) == 4 and np.isfinite(r["auc_mean"]) for r in grid)
    assert metrics["counts"] == {"documents_in": 19, "documents_used": 16, "documents_quarantined": 3,
                                 "members_used": 8, "nonmembers_used": 8}
    # the model trained on the member books for several epochs: whole-document membership is easy here
    assert metrics["best"]["auc_mean"] >= 0.8, metrics["best"]
    table = (doc_mia / "report.md").read_text()
    assert table.count("\n| ") >= 11 and "MaxNorm-TF | HistFE" in table and "C=64" in table
    doc = assert_self_contained(doc_mia, "Member documents can be told from non-members with AUC "
                                         f"{metrics['best']['auc_mean']:.2f}")
    assert doc.count("<td>HistFE</td>") == sum(r["features"] == "HistFE" for r in metrics["results"])  # every row
    scores = pq.read_table(doc_mia / "scores.parquet").to_pandas()
    assert len(scores) == 16 and scores["MaxNorm-TF/HistFE/C=32"].notna().all()
    assert sorted(scores["fold"].value_counts().tolist()) == [4, 4, 4, 4]


def test_doc_mia_stats_from_the_pool_equal_direct_scoring(doc_mia, books):
    """The whole-document stats the workers wrote equal the Scorer run in this process on the same part's documents
    (same batch policy), and the driver never needed them: the grid's intermediate features are gone."""
    from scoring.audits.docmia.stats import document_scorers, document_stats
    from scoring.lm.model import load_causal_lm

    name = next(p.name for p in sorted((doc_mia / "documents.parquet").glob("part-*.parquet"))
                if pq.read_metadata(p).num_rows)  # the first part holding documents (bad.jsonl's holds none)
    docs = pq.read_table(doc_mia / "documents.parquet" / name).to_pylist()
    stats = pq.read_table(doc_mia / "doc_stats.parquet" / name).to_pylist()
    lm, tok = load_causal_lm(books["model"], device="cpu")
    tok.model_max_length = 1 << 40
    enc = tok([Path(d["path"]).read_text() for d in docs], add_special_tokens=True)["input_ids"]
    direct = document_stats(document_scorers(lm, books["model"], (32, 64), True, 16), [d["id"] for d in docs], enc)
    assert [(r["id"], r["context"]) for r in stats] == [(r["id"], r["context"]) for r in direct]
    for got, want in zip(stats, direct):
        assert got["token_ids"] == want["token_ids"]
        np.testing.assert_allclose(got["lp"], want["lp"], atol=1e-5)
        np.testing.assert_allclose(got["p_sum"], want["p_sum"], rtol=1e-5, atol=1e-6)
    for d in docs:
        assert d["mean_lp"] == pytest.approx([np.mean(r["lp"]) for r in stats if r["id"] == d["id"]], abs=1e-12)
    assert not (doc_mia / "_grid").exists()


def test_unlearning_audit_flags_failed_unlearning_not_exact_unlearning(books, ray_session, tmp_path):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    from scoring.studies.contamination import torch_threads
    from scoring.studies.known_membership import KNOWN_MEMBERSHIP_TRAINING
    from jobs.kit.studies import train_tiny_gpt2

    root, original = Path(books["root"]), books["model"]
    forget = tmp_path / "forget"
    shutil.copytree(books["folders"]["target/members"], forget)
    bad = write_malformed(forget / "bad.jsonl")
    retain = [p.read_text() for p in sorted((root / "calib" / "members").glob("*.txt"))]
    # exact unlearning: a fresh model with the original's tokenizer, trained as long on the retain books only;
    # failed unlearning: the original nudged for 20 steps at lr 1e-4 on the retain books
    torch.manual_seed(1)
    GPT2LMHeadModel(GPT2Config.from_pretrained(original)).save_pretrained(tmp_path / "fresh")
    PreTrainedTokenizerFast.from_pretrained(original).save_pretrained(tmp_path / "fresh")
    with torch_threads(1):
        train_tiny_gpt2(retain, tmp_path / "exact", init_from=tmp_path / "fresh", steps=books["train"]["steps"],
                        seed=0, **KNOWN_MEMBERSHIP_TRAINING)
        train_tiny_gpt2(retain, tmp_path / "failed", init_from=original, steps=20, lr=1e-4, seed=0,
                        **KNOWN_MEMBERSHIP_TRAINING)
    reports = {}
    for name in ("failed", "exact"):
        invoke("unlearning-audit", "--original", original, "--unlearned", tmp_path / name, "--corpus", forget,
               "--out", tmp_path / f"out_{name}", "--batch-size", 16, "--quiet")
        reports[name] = json.loads((tmp_path / f"out_{name}" / "report.json").read_text())
        assert reports[name]["counts"]["chunks_scored"] == 4 * 3  # 1500-word books → 3 chunks of 512 words
        assert reports[name]["counts"]["documents_quarantined"] == 3
        assert_quarantine(tmp_path / f"out_{name}" / "quarantine.parquet", bad, context=("unit",))
    failed, exact = reports["failed"], reports["exact"]
    assert failed["flagged_share"] >= 0.9 and 0.95 < failed["ratio_quantiles"]["0.5"] < 1.05, failed
    # the exact-unlearned model finds the forgotten books less likely: Min-K% ratios above the 1.15 band
    assert exact["flagged_share"] <= 0.25 and exact["ratio_quantiles"]["0.5"] > 1.15, exact
    md = (tmp_path / "out_failed" / "report.md").read_text()
    listed = md.split("## Flagged chunks (12)")[1]
    assert sum(line.startswith("| `") for line in listed.splitlines()) == 12
    doc = assert_self_contained(tmp_path / "out_failed", "Unlearning likely failed on an estimated "
                                f"{100 * failed['flagged_share']:.0f}% [", "Flagged chunks (12)")
    assert doc.count("data:image/png;base64,") == 1  # ratios_hist.png


def test_book_audit_through_a_served_model_equals_the_local_audit(books, book_audit, tmp_path):
    """`audit --api-base`: the same books, the same model behind the loopback OpenAI-compatible server (echo):
    the threshold, the calibration AUC and every document's rate are those of the audit from the weights."""
    from scoring.api.loopback import LoopbackServer

    f = books["folders"]
    out = tmp_path / "served"
    with LoopbackServer(books["model"], name="books-model") as server:
        invoke("audit", "--target", f"{books['root']}/target", "--calib-members", f["calib/members"],
               "--calib-nonmembers", f["calib/nonmembers"], "--model", "books-model", "--api-base", server.url,
               "--tokenizer", books["model"], "--out", out, "--snippets", 20, "--snippet-words", 128,
               "--n-bootstrap", 1000, "--quiet")
    got, want = json.loads((out / "report.json").read_text()), book_audit[1]
    assert got["served_model"]["method"] == "echo" and want["served_model"] is None
    assert got["calibration"]["threshold"] == pytest.approx(want["calibration"]["threshold"], abs=1e-4)
    assert got["calibration"]["auc"] == pytest.approx(want["calibration"]["auc"], abs=1e-6)
    assert {d["path"]: d["rate"] for d in got["documents"]} == {d["path"]: d["rate"] for d in want["documents"]}
