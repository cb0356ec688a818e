"""Credential redaction: keys that name credentials, values shaped like AWS keys, environment secrets, overrides,
and every log record."""
from __future__ import annotations

import logging

import pytest

from jobs.kit.redact import (REDACTED, credential_keys, install_log_redaction, is_secret_key, redact, redact_text,
                         secret_values)

FAKE_ID = "AKIAIOSFODNN7EXAMPLE"
FAKE_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize("key", ["aws_secret_access_key", "AWS_ACCESS_KEY_ID", "apiKey", "hf_token", "HF_TOKEN",
                                 "db-password", "sessionToken", "credentials", "auth", "private_key"])
def test_credential_keys(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["max_tokens", "tokenizer", "monkey", "keyword", "id_field", "member_before",
                                 "title_patterns", "author", "n_tokens", "path"])
def test_not_credential_keys(key):
    assert not is_secret_key(key)


def test_redact_config_values_and_shapes():
    cfg = {"source": {"kind": "files", "path": "/data/x", "aws_secret_access_key": FAKE_SECRET,
                      "note": f"id {FAKE_ID}", "url": "https://user:hunter22@example.org/db"},
           "buckets": [32, 64], "max_tokens": 5, "sha": "a" * 40, "sha256": "b" * 64}
    out = redact(cfg)
    assert out["source"]["aws_secret_access_key"] == REDACTED
    assert out["source"]["note"] == f"id {REDACTED}"
    assert out["source"]["url"] == f"https://user:{REDACTED}@example.org/db"
    assert out["source"]["path"] == "/data/x" and out["buckets"] == [32, 64] and out["max_tokens"] == 5
    assert out["sha"] == "a" * 40 and out["sha256"] == "b" * 64  # hex digests are not secrets
    assert cfg["source"]["aws_secret_access_key"] == FAKE_SECRET  # a copy: the input is untouched
    assert credential_keys(cfg) == ["source.aws_secret_access_key"]
    assert secret_values(cfg) == [FAKE_SECRET]


def test_overrides_and_free_text():
    assert redact(["source.aws_secret_access_key=xyz123abc", "cutoffs.member_before=2015-01-01"]) == [
        f"source.aws_secret_access_key={REDACTED}", "cutoffs.member_before=2015-01-01"]
    assert redact_text(f"key {FAKE_SECRET} end") == f"key {REDACTED} end"
    # a path with a few slashes and mixed case, exactly 40 characters long, is not taken for a key
    path = "/Users/Ann/Runs/Release2024/stackmia/ab"
    assert len(path) == 39 and redact_text(path + "c") == path + "c"


def test_environment_secrets_are_scrubbed_anywhere(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "not-a-known-shape-123")
    assert redact_text("error: bad token not-a-known-shape-123!") == f"error: bad token {REDACTED}!"
    assert redact({"msg": "x not-a-known-shape-123 y"}) == {"msg": f"x {REDACTED} y"}


def test_log_records_from_any_logger_are_redacted(monkeypatch, caplog):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "planted-fake-secret-value")
    install_log_redaction()
    install_log_redaction()  # idempotent
    with caplog.at_level(logging.INFO):
        logging.getLogger("some.library").info("connecting with %s and %s", "planted-fake-secret-value", FAKE_ID)
    assert "planted-fake-secret-value" not in caplog.text and FAKE_ID not in caplog.text
    assert caplog.text.count(REDACTED) == 2


@pytest.mark.parametrize("key", ["token stats written", "RAY_AUTH_MODE", "token_budget", "auth_mode", "key_count",
                                 "max_batch_tokens", "token_freq"])
def test_descriptive_keys_are_not_credentials(key):
    assert not is_secret_key(key)


def test_run_record_labels_and_harmless_env_values_survive(monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("HF_TOKEN", "hf_realsecretvalue123")
    phases = {"phases_s": {"token stats written": 1.5, "score": 2.0}}
    assert redact(phases) == phases
    assert redact_text("ray started with auth disabled") == "ray started with auth disabled"
    assert redact_text("using hf_realsecretvalue123 now") == f"using {REDACTED} now"


def test_the_working_directory_and_paths_are_not_secrets(monkeypatch, tmp_path):
    """PWD ("pwd" abbreviates password elsewhere) holds the working directory: every path under it used to be
    written as [REDACTED]/... in run.json and reports."""
    workdir = tmp_path / "runs"
    workdir.mkdir()
    creds = tmp_path / "credentials"
    creds.write_text("x")
    monkeypatch.setenv("PWD", str(workdir))
    monkeypatch.setenv("OLDPWD", str(tmp_path))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-not-real-0123456789")
    run = {"out": str(workdir / "eval"), "benchmark": f"{workdir}/bench/data", "cwd": str(workdir),
           "note": f"read {creds}", "command": f"tidemark evaluate --out {workdir}/eval",
           "error": "HTTP 401 with key sk-planted-not-real-0123456789"}
    out = redact(run)
    assert {k: out[k] for k in ("out", "benchmark", "cwd", "note", "command")} == {
        k: run[k] for k in ("out", "benchmark", "cwd", "note", "command")}
    assert out["error"] == f"HTTP 401 with key {REDACTED}"  # a real secret in the environment still goes
    assert is_secret_key("DB_PWD")  # a password variable that is not the shell's PWD still counts


def test_a_served_models_probe_record_survives():
    probe = {"bias_token": 24576, "bias_reflected_in_logprobs": False, "biased_token_shown": True,
             "max_shift_of_other_tokens": 0.0, "method": "direct", "tokens_checked": 16,
             "prompt": {"format": "text", "server_prefix_tokens": 0}}
    assert redact({"served_model": {"probe": probe}}) == {"served_model": {"probe": probe}}
    assert credential_keys({"probe": probe}) == []
    # text under the same words is still a credential
    assert redact({"bias_token": "sk-abc123def456"}) == {"bias_token": REDACTED}


def test_signed_urls_lose_their_signature_only():
    url = ("https://bucket.s3.amazonaws.com/data/part-0.parquet?X-Amz-Algorithm=AWS4-HMAC-SHA256"
           "&X-Amz-Credential=AKIDEXAMPLE%2F20261125%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261125T000000Z"
           "&X-Amz-Expires=3600&X-Amz-Signature=0a1b2c3d4e5f&X-Amz-SignedHeaders=host")
    got = redact_text(f"reading {url} now")
    assert "0a1b2c3d4e5f" not in got and "AKIDEXAMPLE" not in got
    assert f"X-Amz-Signature={REDACTED}" in got and "X-Amz-Expires=3600" in got and got.endswith(" now")
    assert redact_text("https://h/v1?token=abc123&page=2") == f"https://h/v1?token={REDACTED}&page=2"
