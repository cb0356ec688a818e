"""Known membership for the text-only detectors (make test-slow): a tiny GPT-2 trained until it partly memorises
its members (real passages, repeated), served by the loopback server with sampling and no log-probabilities.
Through `tidemark evaluate --api-logprobs none`, n-gram coverage separates members from held-out passages of the
same source, over completions and over chat; under a model that saw neither half it does not."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from jobs.cli import app
from scoring.api.loopback import LoopbackServer

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.heavy]
COVERAGE = "ngram_coverage@agg=max,n=3,prefix=0.5"


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from jobs.kit.studies import train_tiny_gpt2
    from scoring.studies.known_membership import sotu_passages

    root = tmp_path_factory.mktemp("membership")
    pool = sotu_passages(48, 90, seed=7)
    members, held, other = pool[:30], pool[30:60], pool[60:]
    # 450 steps: member loss ~0.07 (memorised; ~1 min on 2 cores); 250 steps left it at 4.3, and AUC at 0.51
    kw = dict(tokenizer_texts=[p["text"] for p in pool], steps=450, seed=0, vocab_size=1000, context=128,
              positions=512)
    train_tiny_gpt2([p["text"] for p in members] * 20, root / "seen", **kw)
    train_tiny_gpt2([p["text"] for p in other] * 20, root / "unseen", **kw)
    bench = root / "bench.jsonl"
    bench.write_text("".join(json.dumps({"id": p["id"], "input": p["text"], "label": lab}) + "\n"
                             for lab, group in ((1, members), (0, held)) for p in group))
    return root, bench


def evaluate(model, bench, out, *extra) -> dict:
    with LoopbackServer(str(model), name="tiny") as server:
        res = CliRunner().invoke(app, ["evaluate", "--benchmark", str(bench), "--model", "tiny", "--api-base",
                                       server.url, "--api-logprobs", "none", "--methods", "ngram_coverage,samia",
                                       "--samples", "5", "--set-test", "ngram_coverage", "--out", str(out), "--quiet",
                                       *extra], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    metrics = {m["column"]: m for m in json.loads((out / "metrics.json").read_text()) if m["bucket"] == "all"}
    return {"metrics": metrics, "run": json.loads((out / "run.json").read_text())}


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_ngram_coverage_finds_the_members(study, ray_session, tmp_path, endpoint):
    root, bench = study
    got = evaluate(root / "seen", bench, tmp_path, *(["--api-chat"] if endpoint == "chat" else []))
    m = got["metrics"][COVERAGE]
    assert m["auc"] >= 0.75 and m["auc_ci"][0] > 0.55, m
    assert got["run"]["set_test"]["p_value"] < 0.001


def test_a_model_that_saw_neither_half_gives_no_evidence(study, ray_session, tmp_path):
    root, bench = study
    got = evaluate(root / "unseen", bench, tmp_path)
    m = got["metrics"][COVERAGE]
    assert m["auc_ci"][0] < 0.5 < m["auc_ci"][1] or abs(m["auc"] - 0.5) < 0.1, m
    assert got["run"]["set_test"]["p_value"] > 0.01
