"""A local model path that does not exist is named before any job starts Ray; hub ids are left to the loader."""
from __future__ import annotations

from scoring.lm.model import missing_local_model


def test_missing_local_paths_are_named_and_hub_ids_are_not(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "w.gguf").write_bytes(b"GGUF")
    assert missing_local_model(str(tmp_path / "model")) is None
    assert missing_local_model(str(tmp_path / "model" / "w.gguf")) is None
    assert missing_local_model(f"{tmp_path / 'model'}::w.gguf") is None
    assert "no such file" in missing_local_model(str(tmp_path / "nope"))
    assert "no such file" in missing_local_model("./nope-here")
    assert "no such file" in missing_local_model(str(tmp_path / "nope" / "w.gguf"))
    assert "no file x.gguf" in missing_local_model(f"{tmp_path / 'model'}::x.gguf")
    for hub in ("gpt2", "HuggingFaceTB/SmolLM2-135M", "org/repo::model.Q4.gguf"):
        assert missing_local_model(hub) is None, hub
