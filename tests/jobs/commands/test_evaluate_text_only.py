"""`tidemark evaluate --api-logprobs none` end to end on local Ray against the loopback server (a tiny GPT-2
trained here, sampled with a KV cache, answering only text): every row scored or quarantined and the counts
reconciled; the report shows the sampled continuations beside the true one, escaped, the covered runs marked;
`rescore --generations` gives the run's scores without the server; a finished job is not paid twice; a budget
stops the job before it passes the limit, and a rerun with a raised budget asks only the rest and ends where an
unlimited run ends; log-probability detectors are refused by name."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from jobs.cli import app
from scoring.api.loopback import LoopbackServer

pytestmark = [pytest.mark.ray, pytest.mark.slow]

METHODS = "ngram_coverage,samia,name_cloze@ner=rule"


def invoke(*args: str, ok: bool = True):
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


def assert_same_scores(a, b) -> None:
    """Equal score tables, NaN where NaN (a detector that had nothing to score)."""
    import numpy as np

    assert a.column_names == b.column_names and a.num_rows == b.num_rows
    for name in a.column_names:
        x, y = a.column(name).to_numpy(zero_copy_only=False), b.column(name).to_numpy(zero_copy_only=False)
        np.testing.assert_array_equal(x, y, err_msg=name)


def run_args(server, lm, out, *extra):
    return ["evaluate", "--benchmark", lm["bench"], "--model", "loopback", "--api-base", server.url,
            "--api-logprobs", "none", "--out", str(out), "--shard-size", "8", "--samples", "3",
            "--max-new-tokens", "12", "--methods", METHODS, "--quiet", *extra]


@pytest.fixture(scope="module")
def full(generation_lm, ray_session, tmp_path_factory):
    """One unlimited run over the completions endpoint, with a set test."""
    out = tmp_path_factory.mktemp("text_only") / "full"
    with LoopbackServer(generation_lm["model"]) as server:
        invoke(*run_args(server, generation_lm, out, "--set-test", "ngram_coverage"))
        sent = server.requests
    return {"out": out, "requests": sent}


def test_every_row_leaves_the_job_scored_or_quarantined(full):
    out = full["out"]
    run = json.loads((out / "run.json").read_text())
    counts = run["counts"]
    assert counts["in"] == 24 and counts["scored"] + counts["quarantined"] == 24
    scores = pq.read_table(out / "scores.parquet")
    gens = pq.read_table(out / "generations.parquet")
    assert scores.num_rows == counts["scored"] and set(scores.column("id").to_pylist()) <= set(
        gens.column("id").to_pylist())
    gen = run["generation"]
    assert gen["probe"]["n"] is True and gen["spent"]["requests_sent"] == gen["plan"]["requests"]
    # the server saw the probe, then exactly the requests the run says it sent
    assert full["requests"] == gen["probe"]["calls"] + gen["spent"]["requests_sent"]
    # passages without one name are not asked name cloze, with the reason
    assert set(gen["not_scored"]) == {"name_cloze@ner=rule"} and set(gen["not_scored"]["name_cloze@ner=rule"]) == {
        "no_single_name"}
    assert run["set_test"]["column"] == "ngram_coverage@agg=max,n=3,prefix=0.5" and 0 <= run["set_test"]["p_value"] <= 1
    metrics = json.loads((out / "metrics.json").read_text())
    assert {m["method"] for m in metrics} == {"ngram_coverage", "samia", "name_cloze"}


def test_the_report_shows_samples_beside_the_true_continuation_escaped(full):
    html = (full["out"] / "report.html").read_text()
    assert "Set test: suspect vs reference" in html and html.index("p = ") < html.index("Set test")
    assert "true continuation" in html and "<mark>" in html
    assert "<script" not in html
    md = (full["out"] / "report.md").read_text()
    assert "## Text-only run" in md and "## Set test" in md


def test_rescore_from_generations_equals_the_run(full, tmp_path):
    invoke("rescore", "--generations", str(full["out"] / "generations.parquet"), "--methods", METHODS,
           "--out", str(tmp_path))
    a, b = pq.read_table(full["out"] / "scores.parquet"), pq.read_table(tmp_path / "scores.parquet")
    assert_same_scores(a.select(b.column_names), b)


def test_a_finished_job_is_not_paid_twice(full, generation_lm):
    with LoopbackServer(generation_lm["model"]) as server:
        invoke(*run_args(server, generation_lm, full["out"], "--set-test", "ngram_coverage"))
        probe = json.loads((full["out"] / "run.json").read_text())["generation"]["probe"]["calls"]
        assert server.requests == probe  # the probe only: the job was already complete


def test_trace_index_traces_a_finished_run_s_samples_without_asking_again(full, generation_lm, tmp_path):
    """--trace-index on a finished run: only the probe is sent; every generated sample is traced or quarantined,
    against an index of the model's training texts (the members)."""
    pytest.importorskip("pydivsufsort")
    from jobs.commands.index_corpus import IndexConfig, run_index

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": p["id"], "text": p["text"]}) + "\n" for p in generation_lm["members"]))
    run_index(IndexConfig(corpus=str(corpus), out=str(tmp_path / "idx"), progress=False))
    with LoopbackServer(generation_lm["model"]) as server:
        invoke(*run_args(server, generation_lm, full["out"], "--set-test", "ngram_coverage", "--trace-index",
                         str(tmp_path / "idx")))
        probe = json.loads((full["out"] / "run.json").read_text())["generation"]["probe"]["calls"]
        assert server.requests == probe
    gens = pq.read_table(full["out"] / "generations.parquet")
    report = json.loads((full["out"] / "trace" / "report.json").read_text())
    assert report["counts"]["rows_in"] == gens.num_rows
    assert report["counts"]["traced"] == sum(s >= 0 for s in gens.column("sample").to_pylist()) - \
        report["counts"]["reasons"].get("no_words", 0)
    spans = pq.read_table(full["out"] / "trace" / "spans.parquet").to_pylist()
    members = {p["id"] for p in generation_lm["members"]}
    assert spans and {d for s in spans for d in s["doc_ids"]} <= members
    assert (full["out"] / "trace" / "_SUCCESS").exists()


def test_a_budget_stops_before_the_limit_and_a_raised_one_finishes_the_same(full, generation_lm, tmp_path):
    out = tmp_path / "budget"
    with LoopbackServer(generation_lm["model"]) as server:
        cut = invoke(*run_args(server, generation_lm, out, "--max-requests", "10"), ok=False)
        first = server.requests
    assert cut.exit_code == 2
    line = cut.output.strip().splitlines()[-1]
    assert line.startswith("error: budget: the plan for the parts left is 24 rows:") and "--max-requests 10" in line
    assert not (out / "_SUCCESS").exists()
    done = sorted(p.name for p in (out / "_parts").iterdir())
    assert len(done) == 1  # a part asks 8 rows x 3 samples... less the rows without a name: it fits, two do not
    with LoopbackServer(generation_lm["model"]) as server:
        invoke(*run_args(server, generation_lm, out, "--set-test", "ngram_coverage"))
        second = server.requests
    spent = json.loads((full["out"] / "run.json").read_text())["generation"]["spent"]["requests_sent"]
    probe = json.loads((out / "run.json").read_text())["generation"]["probe"]["calls"]
    assert (first - probe) + (second - probe) == spent  # every request paid once over the two runs
    assert_same_scores(pq.read_table(full["out"] / "scores.parquet"), pq.read_table(out / "scores.parquet"))


def test_a_dry_run_sends_only_the_probe(generation_lm, ray_session, tmp_path):
    with LoopbackServer(generation_lm["model"], endpoints=("chat",)) as server:
        res = invoke(*run_args(server, generation_lm, tmp_path, "--api-chat", "--dry-run"))
        assert server.requests == 7
    assert "24 rows:" in res.output and not (tmp_path / "scores.parquet").exists()


def test_what_a_text_only_server_cannot_feed_is_refused_by_name(generation_lm, tmp_path):
    with LoopbackServer(generation_lm["model"]) as server:
        res = invoke(*run_args(server, generation_lm, tmp_path, "--methods", "ngram_coverage,min_k"), ok=False)
        assert res.exit_code == 2 and "min_k need" in res.output and "ngram_coverage" in res.output
        res = invoke("evaluate", "--benchmark", generation_lm["bench"], "--model", "loopback", "--api-base",
                     server.url, "--tokenizer", generation_lm["model"], "--api-chat", "--out", str(tmp_path),
                     ok=False)
        assert res.exit_code == 2 and "--api-chat needs --api-logprobs none" in res.output
        assert server.requests == 0
