"""`tidemark overlap --semantic` end to end on Ray, with a tiny random sentence model (tests/sentence_models.py):
its cosines mean nothing except that identical texts score 1, so benchmark items are planted verbatim as whole
corpus documents beside other documents, and every item carries names and three-digit numbers no other text has.
Planted items are flagged at their document and offsets, the others are not (the threshold set on a null), counts
reconcile with a bad corpus record and a bad benchmark row quarantined, a rerun reuses every part, the page escapes
a planted `<script>`. One heavy test runs the real all-MiniLM-L6-v2 on a hand-written rephrase."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from jobs.commands.overlap import OverlapConfig, run_overlap
from scoring.semantic.calibrate import DEFAULT_CALIBRATION
from sentence_models import build_sentence_model

pytestmark = pytest.mark.ray

NAMES = ("Adaeze Bartholomew Cosima Dmitri Evangeline Fitzgerald Gwendolyn Horatio Isolde Jebediah Kassandra Leopold "
         "Marguerite Nikolai Octavia Percival Quentin Rosalind Sebastian Theodora Ulysses Valentina Wilhelmina Xavier "
         "Yolanda Zebulon Anastasia Benedikt Clementine Desmond").split()
FILLER = ("the farmer walked to the market with a basket of apples and came back home before the rain started "
          "while his dog slept under the old tree").split()
PLANTED = {0: ("a.jsonl", "plant-0"), 3: ("b.jsonl.gz", "plant-3"), 5: ("c.parquet", "plant-5"),
           6: ("a.jsonl", "plant-6")}  # item -> (file, document id)
SCRIPT = 6  # the item whose text holds a <script> tag


def problem(name: str, a: int, b: int) -> str:
    return (f"At the county fair, {name} bought {a} pencils and later gave {b} of them to the children of the "
            f"village. How many pencils did {name} keep for the school?")


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> dict:
    """12 benchmark items (+ one empty row), 10 null items, a corpus of three files (jsonl with a line that is not
    JSON, jsonl.gz, Parquet) holding items 0, 3, 5 and 6 as whole documents among 30 filler documents."""
    rng = random.Random(5)
    root = tmp_path_factory.mktemp("semantic")
    nums = iter(rng.sample(range(100, 1000), 100))
    items = [{"id": f"q{i}", "question": problem(NAMES[i], next(nums), next(nums)), "target": f"#### {9000 + i}"}
             for i in range(12)]  # answers no document holds
    items[SCRIPT]["question"] = (f"At the county fair, <script>alert(1)</script> {NAMES[SCRIPT]} bought {next(nums)} "
                                 f"pencils and {next(nums)} crayons. How many did {NAMES[SCRIPT]} buy?")
    null = [{"id": f"n{i}", "question": problem(NAMES[12 + i], next(nums), next(nums))} for i in range(10)]
    files: dict[str, list] = {"a.jsonl": [], "b.jsonl.gz": [], "c.parquet": []}
    for j in range(30):
        files[list(files)[j % 3]].append({"id": f"doc-{j}", "text": " ".join(
            rng.choice(FILLER) for _ in range(rng.randint(20, 150)))})
    for i, (f, doc) in PLANTED.items():
        files[f].insert(4, {"id": doc, "text": items[i]["question"]})
    corpus = root / "corpus"
    corpus.mkdir()
    lines = {f: "".join(json.dumps(d) + "\n" for d in docs) for f, docs in files.items()}
    (corpus / "a.jsonl").write_text(lines["a.jsonl"] + "{this is not json\n")
    (corpus / "b.jsonl.gz").write_bytes(gzip.compress(lines["b.jsonl.gz"].encode()))
    pq.write_table(pa.Table.from_pylist(files["c.parquet"]), corpus / "c.parquet")
    (root / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items)
                                      + json.dumps({"id": "blank", "question": " "}) + "\n")
    (root / "null.jsonl").write_text("".join(json.dumps(r) + "\n" for r in null))
    model = build_sentence_model(root / "model", [r["question"] for r in items + null] + [" ".join(FILLER)])
    return {"root": root, "items": items, "model": str(model), "corpus": corpus}


def run(study: dict, out: Path, **kw) -> dict:
    cfg = OverlapConfig(**{"benchmark": str(study["root"] / "bench.jsonl"), "corpus": str(study["corpus"]),
                           "out": str(out), "benchmark_field": "question", "semantic": True, "n": 0,
                           "embedder": study["model"], "null": str(study["root"] / "null.jsonl"), "progress": False,
                           **kw})
    return run_overlap(cfg)


@pytest.fixture(scope="module")
def result(ray_session, study) -> tuple[dict, Path]:
    out = study["root"] / "out"
    return run(study, out), out


def test_planted_items_are_flagged_at_their_document_and_the_others_are_not(result, study):
    _, out = result
    rows = {r["id"]: r for r in pq.read_table(out / "semantic.parquet").to_pylist()}
    assert list(rows) == [r["id"] for r in study["items"]]  # every readable row, in benchmark order
    for i, (_, doc) in PLANTED.items():
        r, text = rows[f"q{i}"], study["items"][i]["question"]
        assert r["rephrased"] and r["doc_id"] == doc and r["rank"] == 0, r
        assert (r["start_word"], r["n_words"], r["char_start"], r["char_end"]) == (0, len(text.split()), 0, len(text))
        assert r["score"] == pytest.approx(1.0, abs=1e-5) and r["decision_score"] == pytest.approx(1.0)
        assert r["verifier_score"] == 1.0 and not r["abstain"] and r["numbers_found"] == r["numbers_total"] >= 2
        assert r["answer_found"] is False  # the question is there, its answer (`target`, read by default) is not
    others = [r for rid, r in rows.items() if int(rid[1:]) not in PLANTED]
    assert others and not any(r["rephrased"] for r in others)
    assert all(r["score"] < 1.0 - 1e-4 and r["doc_id"] and r["judge"] is None for r in others)
    s = json.loads((out / "report.json").read_text())["semantic"]
    assert (s["n"], s["flagged"], s["share"]) == (12, 4, 4 / 12) and s["share_ci"][0] < 1 / 3 < s["share_ci"][1]
    assert s["null"]["n"] == 10 and s["null"]["flagged"] == 0 and s["expected_false_flag_rate"] == 0.0
    assert 0.2 < s["false_flag_upper_bound"] < 0.3  # 0 of 10: the one-sided 95% bound is 25.9%
    assert s["verifier"]["answer_field"] == "target" and s["threshold_source"] == "null"
    assert s["judge"] is None and s["embedder"]["path"] == study["model"] and len(s["embedder"]["weights_digest"]) == 64
    assert s["window"]["size"] == 2 * 29 and s["window"]["stride"] == 29 and "median" in s["window"]["how"]


def test_counts_reconcile_with_bad_input_quarantined(result):
    _, out = result
    report = json.loads((out / "report.json").read_text())
    c, s = report["counts"], report["semantic"]["counts"]
    assert (c["rows_in"], c["rows_scored"], c["rows_quarantined"]) == (13, 12, 1) and c["rows_reasons"] == {
        "empty_input": 1}
    assert s["corpus_files"] == 3 and s["corpus_records"] == s["corpus_documents"] + s["corpus_quarantined"]
    assert (s["corpus_documents"], s["corpus_quarantined"], s["corpus_reasons"]) == (34, 1, {"bad_json": 1})
    assert s["windows"] > s["corpus_documents"]  # the longer filler documents are cut into several windows
    assert [q["reason"] for q in pq.read_table(out / "semantic" / "quarantine.parquet").to_pylist()] == ["bad_json"]
    assert report["semantic"]["parts"] == {"parts": 3, "reused": 0, "scored": 3, "replans": 0, "nodes_lost": 0}


def test_n_0_is_the_semantic_pass_alone_and_semantic_parquet_has_its_schema(result):
    from scoring.semantic.decide import SEMANTIC_SCHEMA

    res, out = result
    assert not (out / "rows.parquet").exists() and res["rows"] is None and res["contamination"] is None
    report = json.loads((out / "report.json").read_text())
    assert report["contamination"] is None and "--n 0" in report["verbatim"]
    assert pq.read_schema(out / "semantic.parquet").equals(SEMANTIC_SCHEMA)
    for name in ("report.md", "report.html", "semantic.png", "benchmark_quarantine.parquet",
                 "null_quarantine.parquet", "_SUCCESS"):
        assert (out / name).is_file(), name
    assert "4 of 12 benchmark items (33.3%" in (out / "report.md").read_text()


def test_the_page_shows_each_flagged_item_beside_its_passage_escaped(result, study):
    _, out = result
    page = (out / "report.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<mark>") >= 2 * len(PLANTED) and 'src="data:image/png;base64,' in page
    for _, doc in PLANTED.values():
        assert doc in page


def test_a_rerun_reuses_every_part_and_adds_the_verbatim_pass(ray_session, result, study):
    res0, out = result
    before = pq.read_table(out / "semantic.parquet")
    res = run(study, out, n=13)  # the semantic parts' fingerprint does not depend on the n-gram pass
    report = json.loads((out / "report.json").read_text())
    assert report["semantic"]["parts"]["reused"] == 3 and report["semantic"]["parts"]["scored"] == 0
    assert pq.read_table(out / "semantic.parquet").equals(before)
    rows = {r["id"]: r for r in pq.read_table(out / "rows.parquet").to_pylist()}
    assert all(rows[f"q{i}"]["share"] == 1.0 for i in PLANTED) and res["contamination"]["contaminated"] == 4
    assert res["semantic"]["flagged"] == res0["semantic"]["flagged"] == 4
    md = (out / "report.md").read_text()
    assert md.startswith("# Tidemark overlap") and "## Rephrased items" in md


def test_prefilter_embeds_fewer_windows_and_loses_no_flag(ray_session, result, study):
    """--prefilter 0.5: the filler windows share no anchor with any item and are not embedded; every planted item
    is flagged where it was, and the report says how many windows were cut and embedded."""
    _, full = result
    out = study["root"] / "out-prefilter"
    run(study, out, prefilter=0.5, actors=1)  # one embedder actor: the pool's setting reaches the spec
    s = json.loads((out / "report.json").read_text())["semantic"]
    assert s["settings"]["actors"] == 1 and s["settings"]["gpus_per_actor"] == 0.0
    pf, every = s["prefilter"], json.loads((full / "report.json").read_text())["semantic"]
    assert pf["bar"] == 0.5 and pf["windows_cut"] == every["counts"]["windows"] == s["counts"]["windows_cut"]
    assert 0 < pf["windows_embedded"] == s["counts"]["windows"] < pf["windows_cut"]
    assert pf["threshold_below_bar"] == (s["threshold"] < 0.5)  # said, since flags between the two may be missed
    assert pf["uncovered_queries"] == 0 and every["prefilter"] is None
    cols = ["id", "rephrased", "doc_id"]
    flags = pq.read_table(out / "semantic.parquet", columns=cols).to_pylist()
    before = pq.read_table(full / "semantic.parquet", columns=cols).to_pylist()
    assert [r for r in flags if r["rephrased"]] == [r for r in before if r["rephrased"]] and s["flagged"] == 4


def test_the_cli_refuses_n_0_without_semantic_and_semantic_on_an_index(study, tmp_path):
    from jobs.cli import app

    base = ["overlap", "--benchmark", str(study["root"] / "bench.jsonl"), "--out", str(tmp_path / "o")]
    res = CliRunner().invoke(app, [*base, "--corpus", str(study["corpus"]), "--n", "0"])
    assert res.exit_code == 2 and "--n 0" in res.output and "needs --semantic" in res.output
    res = CliRunner().invoke(app, [*base, "--index", str(tmp_path), "--semantic", "--embedder", study["model"],
                                   "--benchmark-field", "question"])
    assert res.exit_code == 2 and "not a complete index" in res.output  # (test_overlap_semantic_index.py: the rest)
    res = CliRunner().invoke(app, [*base, "--corpus", str(study["corpus"]), "--semantic", "--embedder",
                                   str(tmp_path / "no-model")])
    assert res.exit_code == 2 and "error:" in res.output and not (tmp_path / "o").exists()


# ---------------------------------------------------------------- the real embedder (make test-slow)

ITEM = ("Marisol runs a bakery in Tucson. On Monday she baked 144 blueberry muffins and sold 87 of them before noon. "
        "In the afternoon she baked 36 more and sold 59. How many muffins did Marisol have left at closing time?")
REPHRASE = ("Question 3: A Tucson baker named Marisol made 144 muffins with blueberries on a Monday. By midday, 87 "
            "had been bought by customers. Later that day she made an additional 36 muffins, and 59 more were "
            "purchased. At the end of the day, how many muffins remained unsold in Marisol's shop?")
WORKSHEET = ("Worksheet 7: mixed practice for grade four. Work each problem on scrap paper and show your steps to your "
             "teacher. Question 1: Tobias collects stamps. He had 230 stamps in March and bought 45 more at a fair in "
             "Denver. He then gave 18 to his sister. How many stamps does Tobias have now? Question 2: A farmer in "
             "Oregon picked 312 apples on Saturday and 198 apples on Sunday. She packed them into boxes of 15. How "
             "many full boxes did she fill? " + REPHRASE + " Question 4: Lena reads 25 pages of her novel every "
             "evening. The novel has 400 pages and she has already read 175. How many more evenings will Lena need "
             "to finish it? Answers are on the back page.")
OTHERS = [  # problems of the same style that are not in the corpus, one of them the item's own template
    "Henrietta runs a bakery in Portland. On Friday she baked 210 cinnamon rolls and sold 133 of them before noon. "
    "In the afternoon she baked 48 more and sold 65. How many rolls did Henrietta have left at closing time?",
    "Priya drives a delivery van in Boston. On Tuesday she delivered 168 parcels in the morning and 94 in the "
    "afternoon. Then 23 parcels were returned to the depot. How many parcels did Priya deliver on Tuesday?",
    "Oliver sells lemonade at a stand in Austin. He made 75 cups on Friday and sold 48 of them. On Saturday he made "
    "120 cups and sold 101. How many cups did Oliver have left over in total?"]


@pytest.mark.heavy
def test_minilm_flags_a_rephrase_inside_a_worksheet_that_shares_no_13_gram(ray_session, tmp_path):
    from scoring.semantic.embed import resolve_embedder

    try:
        resolve_embedder("minilm")
    except FileNotFoundError as exc:
        pytest.skip(f"all-MiniLM-L6-v2 is not installed ({exc})")
    (tmp_path / "c").mkdir()
    docs = [{"id": "news", "text": "The city council met on Tuesday to discuss the new bus routes and the budget "
                                   "for repairing roads after the winter storms. " * 3},
            {"id": "worksheet-7", "text": WORKSHEET}]
    (tmp_path / "c" / "web.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    bench = [{"id": "item", "question": ITEM, "target": "#### 34"}] + [
        {"id": f"other{k}", "question": q} for k, q in enumerate(OTHERS)]
    (tmp_path / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bench))
    res = run_overlap(OverlapConfig(benchmark=str(tmp_path / "bench.jsonl"), corpus=str(tmp_path / "c"),
                                    out=str(tmp_path / "out"), benchmark_field="question", semantic=True,
                                    progress=False))
    out = tmp_path / "out"
    verbatim = {r["id"]: r for r in pq.read_table(out / "rows.parquet").to_pylist()}
    assert verbatim["item"]["share"] == 0.0  # no 13-gram in common: the verbatim scan passes it as clean
    rows = {r["id"]: r for r in pq.read_table(out / "semantic.parquet").to_pylist()}
    hit = rows["item"]
    assert hit["rephrased"] and hit["doc_id"] == "worksheet-7" and hit["score"] > 0.6
    assert hit["numbers_found"] == hit["numbers_total"] == 4 and hit["entities_found"] == hit["entities_total"]
    assert REPHRASE in WORKSHEET[hit["char_start"]:hit["char_end"]]
    assert not any(rows[f"other{k}"]["rephrased"] for k in range(len(OTHERS)))
    s = json.loads((out / "report.json").read_text())["semantic"]
    assert s["threshold_source"] == "default"
    assert s["expected_false_flag_rate"] == DEFAULT_CALIBRATION["rate"] == 16 / 3000
    assert s["verifier"]["answer_field"] == "target"
    assert res["semantic"]["flagged"] == 1
