"""`tidemark overlap --semantic --judge-model M --judge-api-base URL` end to end on Ray, against a fake
OpenAI-compatible chat server on 127.0.0.1 that answers "Yes ..." when the passage holds a marker and "No." otherwise,
and counts the requests. The tiny random sentence model (tests/sentence_models.py) and the items' template are
test_overlap_semantic.py's; the corpus holds two items verbatim (flagged by the verifier; one passage marked, so the
judge keeps one flag and vetoes the other), two items and two null items with one number changed (near misses
below the threshold set on the null; one of each marked, so the judge rescues one item and flags one null item).

One OUT, three runs: --judge-budget 2 asks the two most likely pairs only (the rest keep the verifier's decision);
without a budget the rerun asks only the four pairs not yet answered; a third run asks nothing. Each run first sends
the server one probe (semantic_judge.probe_judge), which the fake counts apart from the judged pairs; a server that
cannot be used stops the command with exit 2 before the corpus pass, unless a resumed OUT holds journaled answers."""
from __future__ import annotations

import json
import random
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from jobs.commands.overlap import OverlapConfig, run_overlap
from jobs.parts.overlap.semantic_judge import PROBE_PROMPT, JudgeRequest, probe_judge
from sentence_models import build_sentence_model

pytestmark = pytest.mark.ray

NAMES = "Adaeze Bartholomew Cosima Dmitri Evangeline Fitzgerald Gwendolyn Horatio Isolde Jebediah Kassandra".split()
FILLER = ("the farmer walked to the market with a basket of apples and came back home before the rain started "
          "while his dog slept under the old tree").split()
MARK = "[archived worksheet]"
MODEL, KEY_ENV, KEY = "judge-7b", "TIDEMARK_TEST_JUDGE_KEY", "sekrit-judge-key"
URL_SECRET = "url-password"  # a credential in the API base's URL, which no output may show


def problem(name: str, a: int, b: int) -> str:
    return (f"At the county fair, {name} bought {a} pencils and later gave {b} of them to the children of the "
            f"village. How many pencils did {name} keep for the school?")


class FakeJudge:
    """POST /v1/chat/completions: "Yes, ..." when the user message holds MARK, else "No."; 401 without the key.
    `requests` counts the judged pairs' requests; the probes (probe_judge's fixed prompt) are kept apart in `probes`,
    so the runs' counts stay those of the pairs asked."""

    def __init__(self):
        self.requests = 0
        self.probes: list[dict] = []
        judge = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if body["messages"][-1]["content"] == PROBE_PROMPT:
                    judge.probes.append(body)
                else:
                    judge.requests += 1
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    status, out = 401, {"error": {"message": "invalid api key"}}
                elif self.path != "/v1/chat/completions" or body.get("model") != MODEL:
                    status, out = 404, {"error": {"message": f"no route {self.path} for {body.get('model')}"}}
                else:
                    text = ("Yes, the passage holds the same problem." if MARK in body["messages"][-1]["content"]
                            else "No.")
                    status, out = 200, {"object": "chat.completion", "model": MODEL, "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 3}}
                data = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "FakeJudge":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def judged(ray_session, tmp_path_factory) -> dict:
    """The study and the three runs' reports, semantic.parquet and judge.jsonl (with the server's request count)."""
    rng = random.Random(7)
    root = tmp_path_factory.mktemp("judge")
    nums = iter(rng.sample(range(100, 1000), 60))
    items = [{"id": f"q{i}", "question": problem(NAMES[i], next(nums), next(nums))} for i in range(8)]
    null = [{"id": f"n{i}", "question": problem(NAMES[8 + i], next(nums), next(nums))} for i in range(3)]

    def near(text: str) -> str:  # the item with its first number changed: a near miss for the verifier
        first = next(w for w in text.split() if w.isdigit())
        return text.replace(first, str(next(nums)), 1)

    docs = [{"id": "copy-0", "text": items[0]["question"] + " " + MARK}, {"id": "copy-1", "text": items[1]["question"]},
            {"id": "near-2", "text": near(items[2]["question"]) + " " + MARK},
            {"id": "near-3", "text": near(items[3]["question"])},
            {"id": "null-near-0", "text": near(null[0]["question"])},
            {"id": "null-near-1", "text": near(null[1]["question"]) + " " + MARK}]
    docs += [{"id": f"doc-{j}", "text": " ".join(rng.choice(FILLER) for _ in range(rng.randint(20, 80)))}
             for j in range(12)]
    (root / "corpus").mkdir()
    (root / "corpus" / "web.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items))
    (root / "null.jsonl").write_text("".join(json.dumps(r) + "\n" for r in null))
    model = build_sentence_model(root / "model", [r["question"] for r in items + null] + [" ".join(FILLER)])
    out = root / "out"
    runs = []
    mp = pytest.MonkeyPatch()
    mp.setenv(KEY_ENV, KEY)
    try:
        with FakeJudge() as server:
            for budget in (2, None, None):
                before, probes_before = server.requests, len(server.probes)
                cfg = OverlapConfig(benchmark=str(root / "bench.jsonl"), corpus=str(root / "corpus"), out=str(out),
                                    benchmark_field="question", semantic=True, n=0, embedder=str(model),
                                    null=str(root / "null.jsonl"), progress=False, judge_model=MODEL,
                                    judge_api_base=server.url.replace("//", f"//judge:{URL_SECRET}@"),
                                    judge_budget=budget, judge_api_key_env=KEY_ENV)
                run_overlap(cfg)
                runs.append({"requests": server.requests - before, "probes": server.probes[probes_before:],
                             "report": json.loads((out / "report.json").read_text()),
                             "rows": {r["id"]: r for r in pq.read_table(out / "semantic.parquet").to_pylist()},
                             "answers": [json.loads(x) for x in (out / "semantic" / "judge.jsonl").read_text()
                                         .splitlines()],
                             "page": (out / "report.html").read_text(), "md": (out / "report.md").read_text()})
    finally:
        mp.undo()
    return {"runs": runs, "out": out, "root": root}


def test_the_budget_asks_the_most_likely_pairs_and_the_rest_keep_the_verifier(judged):
    first = judged["runs"][0]
    j = first["report"]["semantic"]["judge"]
    assert first["requests"] == j["calls"] == 2 and j["budget"] == 2 and j["cached"] == 0
    assert (j["pairs"], j["judged"], j["unjudged_by_budget"], j["failed"]) == (6, 2, 4, 0)
    assert sorted(a["id"] for a in first["answers"]) == ["q0", "q1"]  # the two verbatim copies score highest
    rows = first["rows"]
    assert rows["q0"]["judge"] == "yes" and rows["q0"]["rephrased"]
    assert rows["q1"]["judge"] == "no" and not rows["q1"]["rephrased"]  # the judge vetoes the verifier's flag
    assert rows["q2"]["judge"] is None and not rows["q2"]["rephrased"]  # over the budget: the verifier's decision


def test_the_judge_rescues_near_misses_vetoes_flags_and_is_measured_on_the_null(judged):
    second = judged["runs"][1]
    s = second["report"]["semantic"]
    j, rows = s["judge"], second["rows"]
    assert second["requests"] == j["calls"] == 4 and j["cached"] == 2  # the budgeted run's two answers reused
    assert {k: r["judge"] for k, r in rows.items()} == {"q0": "yes", "q1": "no", "q2": "yes", "q3": "no", "q4": None,
                                                        "q5": None, "q6": None, "q7": None}
    assert [k for k, r in rows.items() if r["rephrased"]] == ["q0", "q2"]
    assert 0 < rows["q2"]["decision_score"] < s["threshold"] <= rows["q0"]["decision_score"]  # a rescued near miss
    assert (s["n"], s["flagged"]) == (8, 2) and s["null"]["flagged"] == 0  # the threshold flags no null item
    b, n = j["benchmark"], j["null"]
    assert (b["verifier_flagged"], b["flagged"], b["rescued"], b["vetoed"]) == (2, 2, 1, 1)
    assert b["verdicts"] == {"no": 2, "yes": 2} and j["verdicts"] == {"no": 3, "yes": 3}
    assert (n["n"], n["judged"], n["verifier_flagged"], n["flagged"]) == (3, 2, 0, 1)
    assert n["false_flag_rate"] == pytest.approx(1 / 3) and n["false_flag_upper_bound"] > 1 / 3
    assert j["model"] == MODEL and j["api_key_env"] == KEY_ENV and j["kinds"] == {"math": 6}
    assert set(j["prompts"]) == {"math", "code", "knowledge"} and j["budget"] is None and "judge" not in s["settings"]
    assert j["prompt_tokens"] == 400 and j["completion_tokens"] == 12  # this run's four calls


def test_the_raw_answers_are_kept_one_row_per_judged_pair(judged):
    answers = {a["id"]: a for a in judged["runs"][1]["answers"]}
    assert sorted(answers) == ["n0", "n1", "q0", "q1", "q2", "q3"]
    a = answers["q2"]
    assert a["answer"] == "Yes, the passage holds the same problem." and a["verdict"] == "yes" and not a["null"]
    assert a["doc_id"] == "near-2" and a["kind"] == "math" and len(a["prompt_digest"]) == 16 and len(a["request"]) == 32
    assert a["char_start"] == 0 and a["char_end"] > 0 and a["n_words"] > 0 and a["error"] is None
    assert answers["q0"]["cached"] and not answers["q2"]["cached"] and answers["n1"]["null"]
    assert answers["q1"]["answer"] == "No." and answers["q1"]["verdict"] == "no"
    journal = list((judged["out"] / "semantic" / "judge" / "_requests").rglob("*.jsonl"))
    assert journal  # every answer as the server sent it, by request key


def test_a_rerun_pays_nothing_and_decides_the_same(judged):
    second, third = judged["runs"][1], judged["runs"][2]
    j = third["report"]["semantic"]["judge"]
    assert third["requests"] == j["calls"] == 0 and j["cached"] == 6 and j["prompt_tokens"] == 0
    assert third["rows"] == second["rows"] and third["report"]["semantic"]["parts"]["reused"] == 1
    assert all(a["cached"] for a in third["answers"])


def test_the_report_shows_the_verdicts_and_never_a_credential(judged):
    third = judged["runs"][2]
    page, md = third["page"], third["md"]
    assert "LLM judge judge-7b" in md and "| judge |" in md and "yes (flagged)" in md and "no (not flagged)" in md
    assert "yes (flagged)" in page and "no (not flagged)" in page and "semantic/judge.jsonl" in page
    shown = {t["id"]: t for t in third["report"]["semantic"]["flagged_items"]}
    assert sorted(shown) == ["q0", "q1", "q2"]  # the verifier's flags and the judge's rescue
    for f in [*judged["out"].rglob("*.json"), *judged["out"].rglob("*.jsonl"), *judged["out"].rglob("*.md")]:
        assert KEY not in f.read_text() and URL_SECRET not in f.read_text(), f
    assert third["report"]["semantic"]["judge"]["api_base"].startswith("http://judge:[REDACTED]@127.0.0.1:")


def test_the_cli_refuses_judge_options_that_do_not_go_together(tmp_path):
    from jobs.cli import app

    base = ["overlap", "--benchmark", str(tmp_path / "b.jsonl"), "--corpus", str(tmp_path), "--out",
            str(tmp_path / "o")]
    res = CliRunner().invoke(app, [*base, "--judge-model", "m", "--judge-api-base", "http://127.0.0.1:1/v1"])
    assert res.exit_code == 2 and "--judge-model, --judge-api-base need --semantic" in res.output
    res = CliRunner().invoke(app, [*base, "--semantic", "--judge-model", "m"])
    assert res.exit_code == 2 and "both --judge-model and --judge-api-base" in res.output
    res = CliRunner().invoke(app, [*base, "--semantic", "--judge-budget", "3"])
    assert res.exit_code == 2 and "both --judge-model and --judge-api-base" in res.output
    res = CliRunner().invoke(app, [*base, "--semantic", "--judge-model", "m", "--judge-api-base", "localhost:8000",
                                   "--judge-kind", "math"])
    assert res.exit_code == 2 and "http(s) URL" in res.output
    res = CliRunner().invoke(app, [*base, "--semantic", "--judge-model", "m", "--judge-api-base", "http://h/v1",
                                   "--judge-kind", "trivia"])
    assert res.exit_code == 2 and "--judge-kind must be" in res.output
    assert not (tmp_path / "o").exists()


def test_each_run_probes_the_judge_once_and_the_probe_is_not_journaled(judged):
    for run in judged["runs"]:  # a rerun with every pair cached probes too: the pairs are known only after the pass
        assert len(run["probes"]) == 1
        probe = run["probes"][0]
        assert (probe["model"], probe["max_tokens"], probe["temperature"]) == (MODEL, 1, 0)
    journal = list((judged["out"] / "semantic" / "judge" / "_requests").rglob("*.jsonl"))
    assert sum(len(f.read_text().splitlines()) for f in journal) == 6  # the 2 + 4 pairs asked, no probe


def free_port() -> int:
    """A port on 127.0.0.1 with nothing listening: a connection to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_judge_server_that_is_not_there_stops_the_command_before_the_corpus_pass(tmp_path):
    from jobs.cli import app

    items = [{"id": f"q{i}", "question": problem(NAMES[i], 100 + i, 10 + i)} for i in range(3)]
    (tmp_path / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items))
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "web.jsonl").write_text(json.dumps({"id": "d", "text": items[0]["question"]}) + "\n")
    model = build_sentence_model(tmp_path / "model", [r["question"] for r in items])
    out, port = tmp_path / "out", free_port()
    res = CliRunner().invoke(app, [
        "overlap", "--benchmark", str(tmp_path / "bench.jsonl"), "--corpus", str(tmp_path / "corpus"), "--out",
        str(out), "--benchmark-field", "question", "--semantic", "--n", "0", "--embedder", str(model),
        "--judge-model", MODEL, "--judge-api-base", f"http://judge:{URL_SECRET}@127.0.0.1:{port}/v1",
        "--judge-api-key-env", KEY_ENV])
    assert res.exit_code == 2, res.output
    assert "the LLM judge cannot be used" in res.output and f"127.0.0.1:{port}/v1/chat/completions" in res.output
    assert MODEL in res.output and "Connection refused" in res.output and "--judge-api-base" in res.output
    assert URL_SECRET not in res.output
    assert not list((out / "semantic").glob("candidates.parquet/*")) and not out.exists()  # nothing scanned


def test_the_probe_fails_fast_and_names_the_refusal(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="Connection refused") as exc:
        probe_judge(JudgeRequest(f"http://127.0.0.1:{free_port()}/v1", MODEL, api_key_env=KEY_ENV))
    assert time.perf_counter() - t0 < 10  # three tries ~0.5-1.5 s apart, not the judge's ~30 s of backoff
    assert f"{KEY_ENV} is not set" in str(exc.value)
    with FakeJudge() as server:
        with pytest.raises(RuntimeError, match="HTTP 401: invalid api key"):  # no key in the environment
            probe_judge(JudgeRequest(server.url, MODEL, api_key_env=KEY_ENV))
        monkeypatch.setenv(KEY_ENV, KEY)
        with pytest.raises(RuntimeError, match="HTTP 404: no route .* for judge-13b") as exc:
            probe_judge(JudgeRequest(server.url, "judge-13b", api_key_env=KEY_ENV))
        assert "model 'judge-13b'" in str(exc.value) and "--judge-model" in str(exc.value)
        probe_judge(JudgeRequest(server.url, MODEL, api_key_env=KEY_ENV))  # a working judge: no error
        assert len(server.probes) == 3 and server.requests == 0  # each probe one request: 401 and 404 are not retried


def test_a_rerun_whose_pairs_are_all_journaled_needs_no_judge_server(judged, tmp_path, monkeypatch, capsys):
    """With the server gone, a resumed rerun of an OUT that holds every answer goes on (a warning names the probe's
    failure) and decides as before; without --resume it stops before the corpus pass, as a first run does."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(judged["out"], out)
    monkeypatch.setenv(KEY_ENV, KEY)
    root, gone = judged["root"], f"http://127.0.0.1:{free_port()}/v1"
    cfg = dict(benchmark=str(root / "bench.jsonl"), corpus=str(root / "corpus"), out=str(out),
               benchmark_field="question", semantic=True, n=0, embedder=str(root / "model"),
               null=str(root / "null.jsonl"), progress=False, judge_model=MODEL, judge_api_base=gone,
               judge_api_key_env=KEY_ENV)
    capsys.readouterr()
    run_overlap(OverlapConfig(**cfg))
    err = capsys.readouterr().err
    assert "warning: the LLM judge cannot be used" in err and "Connection refused" in err
    assert "6 journaled answer(s) from an earlier run, so the run goes on" in err
    rows = {r["id"]: r for r in pq.read_table(out / "semantic.parquet").to_pylist()}
    assert rows == judged["runs"][2]["rows"]
    j = json.loads((out / "report.json").read_text())["semantic"]["judge"]
    assert j["calls"] == 0 and j["cached"] == 6
    with pytest.raises(RuntimeError, match="the LLM judge cannot be used"):
        run_overlap(OverlapConfig(**cfg, resume=False))
