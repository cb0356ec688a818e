"""The text-only pool stage without Ray (as on a machine without it): one part read, asked, scored and written; a
server that dies mid-part leaves a journal, and the retried part sends only what the journal lacks and writes
what an uninterrupted part writes. Local paraphrases make DE-COP's question without the server."""
from __future__ import annotations

import json
from dataclasses import asdict

import pyarrow.parquet as pq
import pytest

from jobs.parts.benchmark_parts import plan_parts
from jobs.parts.generation_parts import GenerateParts, Journal
from jobs.plane.scoring_pool import ModelBranch, PrepareParts, ScoringSpec
from scoring.api.client import ApiConfig, ApiFatal
from scoring.api.loopback import LoopbackServer
from scoring.detectors.base import parse_methods
from scoring.generation.kinds import Settings
from scoring.generation.scores import kinds_of


def stage(url: str, out, methods, paraphrases: str = "served") -> GenerateParts:
    api = asdict(ApiConfig(base=url, model="loopback", mode="none", max_retries=0, method="generate"))
    spec = ScoringSpec((ModelBranch("loopback", (), api=api),))
    settings = Settings(samples=3, n_ok=False, max_new_tokens=8)
    generation = {"api": api, "chat": False, "settings": asdict(settings), "kinds": kinds_of(methods),
                  "tokenizer": None, "paraphrases": paraphrases}
    return GenerateParts(spec, 0, None, {"dest": str(out), "methods": methods}, generation)


def prepared(bench: str) -> dict:
    (part,) = plan_parts(bench, 1000)
    spec = ScoringSpec((ModelBranch("loopback", ()),))
    return PrepareParts(spec, [], tokenize=False).prepare(part.to_json(), "[]")


def test_a_part_cut_off_mid_way_resumes_from_its_journal(generation_lm, tmp_path):
    methods = parse_methods("ngram_coverage,samia", input="generations")
    row = prepared(generation_lm["bench"])
    with LoopbackServer(generation_lm["model"]) as srv:
        whole = stage(srv.url, tmp_path / "whole", methods).generate(dict(row))
        assert srv.requests == 24 * 3
    assert whole["rows_in"] == 24 and whole["scored"] + whole["quarantined"] == 24
    with LoopbackServer(generation_lm["model"], die_after=30) as srv:
        with pytest.raises(ApiFatal):
            stage(srv.url, tmp_path / "cut", methods).generate(dict(row))
    saved = Journal(__import__("curation.io.outputs", fromlist=["Location"]).Location(str(tmp_path / "cut")), 0).load()
    assert 20 <= len(saved) <= 30  # what was answered before the server went away (less the requests in flight)
    with LoopbackServer(generation_lm["model"]) as srv:
        resumed = stage(srv.url, tmp_path / "cut", methods).generate(dict(row))
        assert srv.requests == 72 - len(saved)  # only what the journal lacks
    assert resumed["api"]["requests_reused"] == len(saved)
    for name in ("generations.parquet", "scores.parquet"):
        a = pq.read_table(tmp_path / "whole" / name / "part-00000.parquet")
        b = pq.read_table(tmp_path / "cut" / name / "part-00000.parquet")
        assert a.equals(b), name


def test_decop_with_local_paraphrases_and_scripted_answers(generation_lm, tmp_path):
    """DE-COP against scripted answers: the verbatim letter for members, a wrong letter, a refusal or junk for the
    others, in turn. Shares and unparsable counts follow by hand."""
    members = {p["text"] for p in generation_lm["members"]}
    turn = {"n": 0}

    def script(body, prompt):
        if "Question:" not in prompt:
            return None
        options = {line[0]: line[3:] for line in prompt.split("Options:\n", 1)[1].split("\n") if line[1:3] == ". "}
        verbatim = next((k for k, v in options.items() if v in members), None)
        if verbatim:
            return verbatim
        turn["n"] += 1
        return ["B) I think", "I cannot answer that.", "%%%"][turn["n"] % 3]

    methods = parse_methods("decop@orderings=4", input="generations")
    with LoopbackServer(generation_lm["model"], script=script) as srv:
        summary = stage(srv.url, tmp_path, methods, paraphrases="wordnet").generate(prepared(generation_lm["bench"]))
    scores = pq.read_table(tmp_path / "scores.parquet" / "part-00000.parquet").to_pylist()
    gens = pq.read_table(tmp_path / "generations.parquet" / "part-00000.parquet").to_pylist()
    assert {g["endpoint"] for g in gens if g["kind"] == "paraphrase"} == {"local:wordnet"}
    by_id = {r["id"]: r["decop@orderings=4"] for r in scores}
    assert len(by_id) >= 20  # rows whose three paraphrases are not distinct are not asked
    for p in generation_lm["members"]:
        if p["id"] in by_id:
            assert by_id[p["id"]] == 1.0
    for p in generation_lm["held_out"]:
        if p["id"] not in by_id:
            continue
        answers = [g for g in gens if g["id"] == p["id"] and g["kind"] == "decop@orderings=4"]
        picked_b = [g for g in answers if g["text"].startswith("B)")]
        assert by_id[p["id"]] == pytest.approx(sum(g["target"] == "B" for g in picked_b) / len(picked_b))
    quarantined = pq.read_table(tmp_path / "quarantine.parquet" / "part-00000.parquet").to_pylist()
    assert summary["scored"] + len(quarantined) == 24
    assert all(q["stage"] == "generate" for q in quarantined)
    asked = [g for g in gens if g["kind"] == "decop@orderings=4" and g["sample"] >= 0]
    assert summary["answers"] == {"decop_asked": len(asked), "decop_unparsable": sum(
        g["text"] in ("I cannot answer that.", "%%%") for g in asked)}
    assert summary["answers"]["decop_unparsable"] > 0
    assert all(json.loads(g["info"])["order"] for g in asked)
