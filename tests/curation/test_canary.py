"""Canary sets: unique seeded sequences split by a coin, files that commit to them, and refusals of edited or
malformed sets before any scoring."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from curation.canary import CanaryError, load_canaries, make_canaries, write_canaries


def test_canaries_are_unique_seeded_and_split_by_the_coin():
    a = make_canaries(200, seed=7, words=12)
    assert a == make_canaries(200, seed=7, words=12) and a != make_canaries(200, seed=8, words=12)
    assert len({c["text"] for c in a}) == 200 and all(len(c["text"].split()) == 12 for c in a)
    roles = [c["role"] for c in a]
    assert roles.count("plant") == 100 and roles.count("holdout") == 100
    assert [c["id"] for c in a][:2] == ["canary-00000", "canary-00001"]
    assert [c["role"] for c in make_canaries(10, 1, plant_share=0.3)].count("plant") == 3
    with pytest.raises(CanaryError):
        make_canaries(1, 0)


def test_the_cli_writes_byte_identical_files_for_a_seed_and_refuses_to_remake(tmp_path: Path):
    from jobs.cli import app

    for out in ("a", "b"):
        res = CliRunner().invoke(app, ["canary", "make", "--n", "20", "--seed", "3", "--out", str(tmp_path / out)])
        assert res.exit_code == 0, res.output
    for name in ("canaries.jsonl", "plant.txt", "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    plant = [x for x in (tmp_path / "a" / "plant.txt").read_text().splitlines() if x and not x.startswith("#")]
    rows, manifest = load_canaries(tmp_path / "a")
    assert sorted(plant) == sorted(r["text"] for r in rows if r["role"] == "plant") and len(plant) == 10
    assert manifest["roles"] == {"plant": 10, "holdout": 10} and len(manifest["canaries_sha256"]) == 64
    again = CliRunner().invoke(app, ["canary", "make", "--n", "20", "--seed", "3", "--out", str(tmp_path / "a")])
    assert again.exit_code == 2 and "already" in again.output  # refused: a planted set must never be remade


@pytest.mark.parametrize("edit,match", [
    (lambda rows: rows[0].update(text=rows[0]["text"] + " x"), "edited after it was made"),
    (lambda rows: rows[0].update(role="maybe"), "role"),
    (lambda rows: rows[1].update(id=rows[0]["id"]), "duplicate id"),
    (lambda rows: rows[2].update(text="  "), "empty text"),
    (lambda rows: [r.update(role="plant") for r in rows], "no holdout canary"),
])
def test_an_edited_or_malformed_set_is_refused_before_scoring(tmp_path: Path, edit, match):
    rows = make_canaries(6, seed=1)
    write_canaries(tmp_path, rows, seed=1, words=16, plant_share=0.5, tool="t")
    edit(rows)
    data = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
    (tmp_path / "canaries.jsonl").write_text(data)
    if match != "edited after it was made":  # a malformed set whose manifest was updated to match
        import hashlib

        m = json.loads((tmp_path / "manifest.json").read_text())
        m["canaries_sha256"] = hashlib.sha256(data.encode()).hexdigest()
        (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(CanaryError, match=match):
        load_canaries(tmp_path)


def test_lm_generated_canaries_are_seeded_and_recorded(tmp_path: Path):
    from jobs.cli import app
    from jobs.kit.studies import train_tiny_gpt2
    from scoring.studies.known_membership import sotu_passages

    train_tiny_gpt2([p["text"] for p in sotu_passages(64, 40)], tmp_path / "lm", steps=2, context=64)
    args = ["canary", "make", "--n", "6", "--words", "5", "--generator", f"lm:{tmp_path / 'lm'}", "--temperature",
            "1.5", "--seed"]
    for out, seed in (("a", "4"), ("b", "4"), ("c", "5")):
        res = CliRunner().invoke(app, [*args, seed, "--out", str(tmp_path / out)])
        assert res.exit_code == 0, res.output
    assert (tmp_path / "a" / "canaries.jsonl").read_bytes() == (tmp_path / "b" / "canaries.jsonl").read_bytes()
    rows, manifest = load_canaries(tmp_path / "a")
    assert rows != load_canaries(tmp_path / "c")[0]
    assert len({r["text"] for r in rows}) == 6 and all(len(r["text"].split()) == 5 for r in rows)
    assert manifest["generator"] == "lm" and manifest["temperature"] == 1.5
    assert any(f["name"] == "model.safetensors" and len(f["digest"]) == 64 for f in manifest["model"]["files"])
    bad = CliRunner().invoke(app, ["canary", "make", "--n", "4", "--seed", "1", "--generator", "lm:/nowhere",
                                   "--out", str(tmp_path / "d")])
    assert bad.exit_code == 2 and "lm:PATH" in bad.output and not (tmp_path / "d").exists()
