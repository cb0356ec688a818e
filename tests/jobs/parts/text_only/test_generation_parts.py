"""The text-only pool stage without Ray (as on a machine without it): one part read, asked, scored and written; a
server that dies mid-part leaves a journal, and the retried part sends only what the journal lacks and writes
what an uninterrupted part writes. Local paraphrases make DE-COP's question without the server."""
from __future__ import annotations

import json
import math
from dataclasses import asdict

import pyarrow.parquet as pq
import pytest

from curation.io.outputs import Location
from jobs.plane.benchmark_parts import plan_parts
from jobs.parts.text_only.generation import GenerateParts, Journal
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
    saved = Journal(Location(str(tmp_path / "cut")), 0).load()
    assert 20 <= len(saved) <= 30  # what was answered before the server went away (less the requests in flight)
    with LoopbackServer(generation_lm["model"]) as srv:
        resumed = stage(srv.url, tmp_path / "cut", methods).generate(dict(row))
        assert srv.requests == 72 - len(saved)  # only what the journal lacks
    assert resumed["api"]["requests_reused"] == len(saved)
    for name in ("generations.parquet", "scores.parquet"):
        a = pq.read_table(tmp_path / "whole" / name / "part-00000.parquet")
        b = pq.read_table(tmp_path / "cut" / name / "part-00000.parquet")
        assert a.equals(b), name


def test_decop_and_name_cloze_against_scripted_answers(generation_lm, tmp_path):
    """DE-COP (local paraphrases) and name cloze against scripted answers: the verbatim letter and the true name
    for members; a wrong letter or name, a refusal or junk for the others, in turn. Shares, accuracies and
    unparsable counts follow by hand."""
    members = {p["text"] for p in generation_lm["members"]}
    held_out = {p["text"] for p in generation_lm["held_out"]}

    names = {}

    def script(body, prompt):
        if "[MASK]" in prompt:  # name cloze: the name for members, else a wrong name, a refusal or junk
            before, after = prompt.split("Input: ")[-1].split("\n  Output:")[0].split("[MASK]")
            member = next((t for t in members if t.startswith(before) and t.endswith(after)), None)
            names[before] = member is not None
            if member is not None:
                return f"<name>{member[len(before):len(member) - len(after)]}</name>"
            return ["<name>Smith</name>", "I'm sorry, I can't guess.", "<<>>"][len(names) % 3]
        if "Question:" not in prompt:
            return None
        options = {line[0]: line[3:] for line in prompt.split("Options:\n", 1)[1].split("\n") if line[1:3] == ". "}
        verbatim = next((k for k, v in options.items() if v in members), None)
        if verbatim:
            return verbatim
        # a held-out passage: where it stands decides the answer (threads answer in any order)
        truth = next(k for k, v in options.items() if v in held_out)
        return {"A": "I cannot answer that.", "B": "%%%"}.get(truth, "B) I think")

    methods = parse_methods("decop@orderings=4,name_cloze@ner=rule", input="generations")
    with LoopbackServer(generation_lm["model"], script=script) as srv:
        summary = stage(srv.url, tmp_path, methods, paraphrases="wordnet").generate(prepared(generation_lm["bench"]))
    scores = pq.read_table(tmp_path / "scores.parquet" / "part-00000.parquet").to_pylist()
    gens = pq.read_table(tmp_path / "generations.parquet" / "part-00000.parquet").to_pylist()
    assert {g["endpoint"] for g in gens if g["kind"] == "paraphrase"} == {"local:wordnet"}
    by_id = {r["id"]: r["decop@orderings=4"] for r in scores if not math.isnan(r["decop@orderings=4"])}
    assert len(by_id) >= 18  # rows whose three paraphrases are not distinct are not asked
    for p in generation_lm["members"]:
        if p["id"] in by_id:
            assert by_id[p["id"]] == 1.0
    for p in generation_lm["held_out"]:  # in 4 orderings: refused (A), junk (B), "B)" where it stands at C or D
        if p["id"] in by_id:
            assert by_id[p["id"]] == 0.0
    quarantined = pq.read_table(tmp_path / "quarantine.parquet" / "part-00000.parquet").to_pylist()
    assert summary["scored"] + len(quarantined) == 24
    assert all(q["stage"] == "generate" for q in quarantined)
    cloze = {r["id"]: r["name_cloze@ner=rule"] for r in scores if not math.isnan(r["name_cloze@ner=rule"])}
    assert cloze and names  # some passages have exactly one name by the rule
    labels = {p["id"]: 1 for p in generation_lm["members"]} | {p["id"]: 0 for p in generation_lm["held_out"]}
    assert all(v == labels[k] for k, v in cloze.items())  # right for members; wrong, refused or junk otherwise
    asked = [g for g in gens if g["kind"] == "decop@orderings=4" and g["sample"] >= 0]
    scored_held_out = sum(1 for p in generation_lm["held_out"] if p["id"] in by_id)
    assert summary["answers"] == {"decop_asked": len(asked), "decop_unparsable": 2 * scored_held_out}
    assert all(json.loads(g["info"])["order"] for g in asked)
