"""End to end, through the `tidemark` CLI on local Ray (num_cpus=2): a tiny GPT-2 trained in the test on known
members (each seen 3×) must be detected, bad rows must be quarantined without losing anything, and `rescore`
must reproduce the scores from the saved token stats alone."""
from __future__ import annotations

import json
import re

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from jobs.cli import app
from scoring.detectors import REGISTRY

pytestmark = [pytest.mark.ray, pytest.mark.slow]

BAD_LINES = [
    json.dumps({"id": "bad:empty", "input": "", "label": 0}).encode(),
    json.dumps({"id": "bad:nolabel", "input": "A text that has no label at all."}).encode(),
    b'{"id": "bad:latin1", "input": "Caf\xe9 au lait", "label": 1}',
]


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from jobs.kit.studies import build_known_membership

    root = tmp_path_factory.mktemp("study")
    # A fixed number of steps, not seconds: the result must not depend on how busy the machine is.
    info = build_known_membership(root, n_per_label=60, repeats=3, steps=250, seed=0)
    with open(info["benchmark"], "ab") as fh:
        fh.write(b"\n".join(BAD_LINES) + b"\n")
    info["n_rows"] = 60 * 2 * 3 + len(BAD_LINES)
    return info


@pytest.fixture(scope="module")
def evaluated(study, ray_session, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval")
    invoke("evaluate", "--benchmark", study["benchmark"], "--model", study["model"], "--out", str(out),
           "--methods", "all", "--quiet")
    return out


def test_every_output_is_written(evaluated):
    for name in ("scores.parquet", "token_stats.parquet", "metrics.json", "report.md", "report.html", "roc_all.png",
                 "roc_32.png", "roc_64.png", "roc_128.png", "scores_hist.png", "quarantine.parquet", "run.json"):
        assert (evaluated / name).exists(), name  # scores, token stats, quarantine: directories of part files


def test_report_html_reads_in_a_browser(evaluated, tmp_path):
    from report_pages import assert_self_contained, rendered_text

    columns = list(dict.fromkeys(m["column"] for m in json.loads((evaluated / "metrics.json").read_text())))
    doc = assert_self_contained(evaluated, "The best detector, min_k", "blind baseline (no model)", "roc_64.png")
    assert doc.count("data:image/png;base64,") == 5  # four ROC plots and the score histograms
    text = rendered_text(evaluated / "report.html", tmp_path)  # skips where Chromium is not installed
    assert text.startswith("Tidemark evaluation The best detector, min_k")
    for c in columns:
        assert re.search(re.escape(c) + r" 0\.\d{3} \[", text), c  # its row of AUCs in "Every detector"


def test_known_members_are_detected(evaluated):
    metrics = json.loads((evaluated / "metrics.json").read_text())
    auc = {(m["method"], m["bucket"]): m["auc"] for m in metrics}
    assert auc[("min_k", "all")] >= 0.8, auc
    assert auc[("loss", "all")] > 0.5, auc
    # ref needs --ref-model, neighbour --neighbour-model (tests/jobs/commands/test_neighbour_evaluate.py)
    assert {m["method"] for m in metrics} == {n for n, d in REGISTRY.items()
                                              if d.input == "token_stats" and not d.opt_in} - {"ref", "neighbour"}
    for m in metrics:
        assert set(m) >= {"method", "params", "bucket", "n", "auc", "auc_ci", "tpr_at_1_fpr", "tpr_at_5_fpr"}


def test_bad_rows_are_quarantined_and_counts_reconcile(evaluated, study):
    quarantine = pq.read_table(evaluated / "quarantine.parquet").to_pylist()
    assert {q["id"]: q["reason"] for q in quarantine} == {
        "bad:empty": "empty_input", "bad:nolabel": "bad_label", "benchmark:" + str(study["n_rows"]): "not_utf8"}
    rec = json.loads((evaluated / "metrics.json").read_text())[0]
    assert rec["rows_in"] == study["n_rows"]
    assert rec["rows_in"] == rec["rows_scored"] + rec["rows_quarantined"]
    scores = pq.read_table(evaluated / "scores.parquet")
    assert scores.num_rows == rec["rows_scored"]
    # ReCaLL's prefix rows are scored but not evaluated, and are named in run.json.
    run = json.loads((evaluated / "run.json").read_text())
    prefix = set(run["recall_prefix_ids"])
    assert len(prefix) == 3
    in_eval = dict(zip(scores.column("id").to_pylist(), scores.column("in_eval").to_pylist()))
    assert all(not in_eval[i] for i in prefix)
    all_rec = [m for m in json.loads((evaluated / "metrics.json").read_text()) if m["bucket"] == "all"][0]
    assert all_rec["n"] == rec["rows_scored"] - len(prefix)


def test_token_stats_have_one_row_per_text_and_view(evaluated):
    ts = pq.read_table(evaluated / "token_stats.parquet", columns=["id", "view", "lp", "token_ids", "first_predicted"])
    orig = [r for r in ts.to_pylist() if r["view"] == "original"]
    assert len({r["id"] for r in orig}) == len(orig)
    r = orig[0]
    assert len(r["lp"]) == len(r["token_ids"]) - r["first_predicted"]
    assert {"lowercase", "prefixed", "pac:0.3:0:4"} <= set(ts.column("view").to_pylist())


def test_rescore_reproduces_scores_without_the_model(evaluated):
    invoke("rescore", "--token-stats", str(evaluated / "token_stats.parquet"))
    a = pq.read_table(evaluated / "scores.parquet").to_pandas().set_index("id").sort_index()
    b = pq.read_table(evaluated / "rescore" / "scores.parquet").to_pandas().set_index("id").sort_index()
    assert list(a.columns) == list(b.columns)
    for col in a.columns:
        if a[col].dtype.kind == "f":
            np.testing.assert_allclose(a[col].to_numpy(), b[col].to_numpy(), atol=1e-6, equal_nan=True, err_msg=col)
        else:
            assert a[col].tolist() == b[col].tolist(), col


@pytest.mark.heavy
def test_a_200k_token_text_is_windowed_not_dropped(study, ray_session, tmp_path):
    bench = tmp_path / "long.jsonl"
    rows = [json.loads(line) for line in open(study["benchmark"], "rb").read().splitlines()[:6]
            if line.strip().startswith(b"{") and b"bad:" not in line][:4]
    long_text = " ".join(["the people"] * 100_000)  # two words per repeat → ~200k tokens
    rows.append({"id": "long", "input": long_text, "label": 0})
    bench.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    invoke("evaluate", "--benchmark", str(bench), "--model", study["model"], "--out", str(out),
           "--methods", "loss,min_k", "--stride", "63", "--batch-size", "32", "--quiet")
    ts = pq.read_table(out / "token_stats.parquet").to_pylist()
    long_row = next(r for r in ts if r["id"] == "long")
    assert len(long_row["token_ids"]) >= 150_000, len(long_row["token_ids"])
    assert long_row["error"] is None and long_row["n_windows"] > 1000
    assert len(long_row["lp"]) == len(long_row["token_ids"]) - 1  # every token after the first, once
    scores = pq.read_table(out / "scores.parquet").to_pylist()
    assert len(scores) == len(rows) and np.isfinite(next(s["loss"] for s in scores if s["id"] == "long"))


def test_scores_equal_the_one_process_reference(evaluated, study):
    """The streaming data plane (parts read, scored, detected and written on the workers) against the scores the
    first version computed: every row tokenised and scored in one process, the whole token-stats table in memory,
    DC-PDD's frequencies counted over it, detectors run over all of it at once. The ReCaLL prefix is the one this
    run chose (the rule that picks it changed on purpose: a seeded hash of ids instead of a draw from non-members
    held in memory); with it, every detector must agree within 1e-6. The reference scores one window per forward
    pass, as the first version did; the plane uses the CPU default batches (up to 16 windows within 2,048 tokens),
    so this also bounds what batching changes."""
    from jobs.plane.benchmark_reader import read_benchmark
    from scoring.detectors import parse_methods
    from scoring.detectors.dc_pdd import count_tokens
    from scoring.stats.evaluation import compute_scores
    from scoring.lm.model import load_tokenizer
    from jobs.plane.tasks import ScoreTask, TokenizeTask
    from scoring.lm.tokenstats import TOKEN_STATS_SCHEMA
    from scoring.lm.views import ORIGINAL, strip_prefixes
    import pyarrow as pa

    rows, _ = read_benchmark(study["benchmark"])
    run = json.loads((evaluated / "run.json").read_text())
    prefix_ids = run["recall_prefix_ids"]
    prefix_text = "\n\n".join(r["input"] for r in rows if r["id"] in set(prefix_ids)) + "\n\n"
    methods = [m for m in parse_methods("all") if m.name not in ("ref", "neighbour")]
    views = tuple(run["views"])
    texts = pa.Table.from_pylist([{"id": r["id"], "input": r["input"]} for r in rows])
    tokens = TokenizeTask(study["model"], views, prefix_text)(texts)
    # DC-PDD's frequencies are counted over every row's original tokens (tokenising is cheap); the batch-1 forward
    # passes, which are not, run on every third row: each row's scores depend on its own passes alone.
    orig = [t for v, t in zip(tokens.column("view").to_pylist(), tokens.column("token_ids").to_pylist())
            if v == ORIGINAL]
    freq = count_tokens(orig, len(load_tokenizer(study["model"])))
    sample = {r["id"] for r in rows[::3]}
    tokens = tokens.filter(pa.array([i in sample for i in tokens.column("id").to_pylist()]))
    scored = ScoreTask(study["model"], scorer_kwargs={"max_batch_size": 1})(tokens)  # the first version: batch 1
    token_stats = strip_prefixes(scored, TOKEN_STATS_SCHEMA)
    good = [dict(r, in_eval=r["id"] not in set(prefix_ids)) for r in rows if r["id"] in sample]
    want = compute_scores(token_stats, good, methods, {"token_freq": freq}).to_pandas().set_index("id")
    got = pq.read_table(evaluated / "scores.parquet").to_pandas().set_index("id")
    assert sorted(got.index) == sorted(r["id"] for r in rows) and len(want) == len(sample) >= 100
    got = got.loc[want.index]
    for col in want.columns:
        if want[col].dtype.kind == "f":
            np.testing.assert_allclose(got[col].to_numpy(), want[col].to_numpy(), atol=1e-6, rtol=0,
                                       equal_nan=True, err_msg=col)
        else:
            assert got[col].tolist() == want[col].tolist(), col
    ts = pq.read_table(evaluated / "token_stats.parquet", columns=["id", "view", "lp"])
    assert [(i, v) for i, v in zip(ts.column("id").to_pylist(), ts.column("view").to_pylist()) if i in sample] == [
        (i, v) for i, v in zip(token_stats.column("id").to_pylist(), token_stats.column("view").to_pylist())]


def test_con_recall_and_gradnorm_on_the_pool(study, ray_session, tmp_path):
    """Con-ReCall's labelled prefixes are chosen, named in run.json and left out of every metric; GradNorm's
    gradient view is back-propagated on the scorer actors and its scores equal the gradient computed by hand."""
    from jobs.plane.benchmark_reader import read_benchmark
    from scoring.lm.gradnorm import GradNorms, split_norms
    from scoring.lm.model import load_causal_lm

    small = tmp_path / "small.jsonl"  # 20 rows of each label, 32-word bucket: a shorter run
    bucket = [r for r in read_benchmark(study["benchmark"])[0] if r["bucket"] == "32"]
    rows = [r for r in bucket if r["label"] == 1][:20] + [r for r in bucket if r["label"] == 0][:20]
    small.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    invoke("evaluate", "--benchmark", str(small), "--model", study["model"], "--out", str(out), "--methods",
           "loss,recall,con_recall@shots=4,gradnorm,gradnorm@p=2", "--shard-size", "15", "--quiet")
    run = json.loads((out / "run.json").read_text())
    labelled = run["con_recall_prefix_ids"]
    labels = {r["id"]: r["label"] for r in rows}
    assert len(labelled["member"]) == len(labelled["nonmember"]) == 4
    assert {labels[i] for i in labelled["member"]} == {1} and {labels[i] for i in labelled["nonmember"]} == {0}
    used = set(labelled["member"]) | set(labelled["nonmember"]) | set(run["recall_prefix_ids"])
    assert len(run["recall_prefix_ids"]) == 3 and set(run["recall_prefix_ids"]) <= set(labelled["nonmember"])
    scores = pq.read_table(out / "scores.parquet").to_pylist()
    assert {r["id"] for r in scores if not r["in_eval"]} == used
    metric = next(m for m in json.loads((out / "metrics.json").read_text())
                  if m["column"] == "con_recall@gamma=0.5,shots=4" and m["bucket"] == "all")
    assert metric["n"] == len(rows) - len(used)
    assert "con_recall uses 4 labelled members and 4 labelled non-members" in (out / "report.md").read_text()
    lm, tok = load_causal_lm(study["model"], device="cpu")
    by_hand = GradNorms(lm, context=512)
    for r in scores[:3]:
        norms = by_hand.one(tok(next(x["input"] for x in rows if x["id"] == r["id"]))["input_ids"])
        assert r["gradnorm@p=inf"] == pytest.approx(-split_norms(norms, "inf").mean(), rel=1e-4)
        assert r["gradnorm@p=2"] == pytest.approx(-split_norms(norms, "2").mean(), rel=1e-4)
    ts = pq.read_table(out / "token_stats.parquet", columns=["view", "grad_norms"]).to_pylist()
    assert all(t["grad_norms"] for t in ts if t["view"] == "grad") and sum(t["view"] == "grad" for t in ts) == 40
