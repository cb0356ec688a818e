"""`tidemark evaluate --api-base` end to end on local Ray against the loopback server (127.0.0.1, started and
stopped here) serving a tiny GPT-2 trained here: scores over the API equal local scoring of the same weights, the
key never lands in an output, Min-K%++ is refused unless its top-n approximation is asked for, and a server that
dies mid-job stops the job with one clear line, after which the same command resumes."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pyarrow.compute as pc
import pytest
from typer.testing import CliRunner

from jobs.cli import app
from jobs.plane.part_store import read_parts
from curation.io.outputs import Location
from scoring.api.loopback import LoopbackServer
from scoring.detectors import parse_methods

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.heavy]

METHODS = "loss,zlib,lowercase,min_k,max_k,pac@n=2,recall,dc_pdd,tag_tab"
KEY = "sk-tidemark-test-key"


def invoke(*args: str, ok: bool = True):
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from jobs.kit.studies import build_known_membership

    root = tmp_path_factory.mktemp("served")
    return build_known_membership(root, n_per_label=12, buckets=(32, 64), repeats=3, steps=120, seed=0)


def scores(out, columns):
    table = read_parts(Location(str(out)), "scores.parquet", ["id", *columns])
    table = table.take(pc.sort_indices(table, [("id", "ascending")]))
    return {c: table.column(c).to_numpy() for c in ["id", *columns]} if table.num_rows else {}


@pytest.fixture(scope="module")
def local(study, ray_session, tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    invoke("evaluate", "--benchmark", study["benchmark"], "--model", study["model"], "--out", str(out),
           "--methods", METHODS, "--shard-size", "12", "--quiet")
    return out


def served_args(server, study, out, *extra):
    return ["evaluate", "--benchmark", study["benchmark"], "--model", "tiny", "--api-base", server.url,
            "--tokenizer", study["model"], "--out", str(out), "--shard-size", "12", "--quiet", *extra]


def test_echo_scores_equal_local_scoring(study, local, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    out = tmp_path / "echo"
    with LoopbackServer(study["model"], name="tiny", api_key=KEY, fail_first=[429, 500]) as server:
        invoke(*served_args(server, study, out, "--methods", METHODS + ",min_k_pp@topk=5"))
    cols = [m.column for m in parse_methods(METHODS)]
    want, got = scores(local, cols), scores(out, cols)
    assert list(got["id"]) == list(want["id"])
    for c in cols:
        np.testing.assert_allclose(got[c], want[c], atol=1e-4, rtol=0, err_msg=c)
    run = json.loads((out / "run.json").read_text())
    served = run["served_model"]
    assert served["method"] == "echo" and served["lp_source"] == "api:echo:top5"
    assert served["probe"]["retries"] + served["requests"]["retries"] == 2  # the injected 429 and 500, retried
    assert served["extraction_error_bound_nats"] == 0.0 and served["tokens_per_call"] > 1
    ts = read_parts(Location(str(out)), "token_stats.parquet", ["lp_source"])
    assert set(ts.column("lp_source").to_pylist()) == {"api:echo:top5"}
    approx = scores(out, ["min_k_pp@k=0.2,topk=5"])["min_k_pp@k=0.2,topk=5"]  # labelled as the approximation
    assert np.isfinite(approx).all()
    # rescore works unchanged on a served model's token stats, and refuses what they cannot give
    rescored = tmp_path / "rescored"
    invoke("rescore", "--token-stats", str(out / "token_stats.parquet"), "--out", str(rescored))
    import pyarrow.parquet as pq

    again = pq.read_table(rescored / "scores.parquet")
    assert "min_k_pp@k=0.2" not in again.column_names  # `all` leaves out what top-n stats cannot serve
    by_id = dict(zip(again.column("id").to_pylist(), again.column("loss").to_pylist()))
    np.testing.assert_allclose([by_id[i] for i in got["id"]], got["loss"], atol=1e-9)
    refused = invoke("rescore", "--token-stats", str(out / "token_stats.parquet"), "--methods", "min_k_pp",
                     "--out", str(tmp_path / "r2"), ok=False)
    assert refused.exit_code == 2 and "min_k_pp@topk=5" in refused.output
    for root, _, files in os.walk(out):  # the key travelled as a bearer token only
        for name in files:
            with open(os.path.join(root, name), "rb") as fh:
                assert KEY.encode() not in fh.read(), name


def test_logit_bias_inversion_equals_local_scoring(study, local, tmp_path):
    # A token per request or two: 16 rows keep it short. These detectors read each row alone (no prefix, no
    # corpus frequencies), so the rows' scores from the full local run are the reference.
    small = tmp_path / "small.jsonl"
    small.write_text("".join(open(study["benchmark"]).readlines()[:16]))
    out = tmp_path / "bias"
    with LoopbackServer(study["model"], name="tiny", bias_logprobs="after") as server:
        invoke(*served_args(server, {**study, "benchmark": str(small)}, out, "--methods", "loss,min_k,max_k,zlib",
                            "--api-logprobs", "logit-bias"))
    cols = ["loss", "min_k@k=0.2", "max_k@k=0.2", "zlib"]
    got, want = scores(out, cols), scores(local, cols)
    keep = np.isin(want["id"], got["id"])
    assert keep.sum() == 16
    for c in cols:
        np.testing.assert_allclose(got[c], want[c][keep], atol=1e-4, rtol=0, err_msg=c)
    served = json.loads((out / "run.json").read_text())["served_model"]
    assert served["method"] == "inversion" and 1 < served["calls_per_token"] < 2


def test_min_k_pp_is_refused_over_an_api_by_name(study, tmp_path):
    with LoopbackServer(study["model"], name="tiny") as server:
        result = invoke(*served_args(server, study, tmp_path / "x", "--methods", "loss,min_k_pp"), ok=False)
    assert result.exit_code == 2
    assert "min_k_pp" in result.output and "topk=5" in result.output


def test_a_server_that_dies_stops_the_job_and_the_rerun_resumes(study, local, ray_session, tmp_path):
    out = tmp_path / "dies"
    args = ("--methods", "loss,min_k", "--api-max-retries", "1")
    # 48 rows in 5 parts, ~21 requests a part (one per window) after the probe's one: it dies in part 4 or so
    with LoopbackServer(study["model"], name="tiny", die_after=75) as server:
        result = invoke(*served_args(server, study, out, *args), ok=False)
    assert result.exit_code == 2
    assert "did not answer after 2 tries" in result.output and "rerun the same command to resume" in result.output
    saved = int(re.search(r"\((\d+) part\(s\) saved", result.output).group(1))
    assert 1 <= saved < 5
    assert not (out / "_SUCCESS").exists()
    with LoopbackServer(study["model"], name="tiny") as server:  # back, at another address: the same job
        invoke(*served_args(server, study, out, *args))
    run = json.loads((out / "run.json").read_text())
    assert run["parts"]["reused"] == saved and run["counts"]["in"] == run["counts"]["scored"] + run["counts"]["quarantined"]
    want, got = scores(local, ["loss", "min_k@k=0.2"]), scores(out, ["loss", "min_k@k=0.2"])
    for c in ("loss", "min_k@k=0.2"):
        np.testing.assert_allclose(got[c], want[c], atol=1e-4, rtol=0, err_msg=c)
