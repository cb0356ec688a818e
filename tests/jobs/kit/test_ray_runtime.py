"""Which Ray a driver joins (jobs/kit/runtime.py), with sockets on 127.0.0.1 standing in for heads: a stale
cluster record must not block a run, and an explicit RAY_ADDRESS that does not answer fails in one line."""
from __future__ import annotations

import socket

import pytest

from jobs.kit import runtime as ray_runtime


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the block ends: nothing listens there


@pytest.fixture
def live_head():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield f"127.0.0.1:{s.getsockname()[1]}"
    s.close()


def test_a_dead_recorded_cluster_is_ignored_for_a_local_runtime(monkeypatch):
    dead = f"127.0.0.1:{closed_port()}"
    monkeypatch.setattr(ray_runtime, "recorded_cluster", lambda: dead)
    address, note = ray_runtime.choose_address({})
    assert address == "local" and dead in note and "does not answer" in note


def test_a_live_recorded_cluster_is_joined_as_ray_would(monkeypatch, live_head):
    monkeypatch.setattr(ray_runtime, "recorded_cluster", lambda: live_head)
    assert ray_runtime.choose_address({}) == (None, None)
    monkeypatch.setattr(ray_runtime, "recorded_cluster", lambda: None)
    assert ray_runtime.choose_address({}) == (None, None)


def test_an_explicit_address_must_answer(monkeypatch, live_head):
    dead = f"127.0.0.1:{closed_port()}"
    with pytest.raises(RuntimeError, match=f"RAY_ADDRESS={dead}: no Ray cluster answers"):
        ray_runtime.choose_address({"RAY_ADDRESS": dead})
    assert ray_runtime.choose_address({"RAY_ADDRESS": live_head}) == (live_head, None)
    assert ray_runtime.choose_address({"RAY_ADDRESS": "ray://head:10001"}) == ("ray://head:10001", None)
    monkeypatch.setattr(ray_runtime, "recorded_cluster", lambda: dead)
    with pytest.raises(RuntimeError, match="no Ray cluster answers"):  # `auto` resolves to the dead record
        ray_runtime.choose_address({"RAY_ADDRESS": "auto"})


def test_the_cli_says_it_in_one_line(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from jobs.cli import app

    import ray

    dead = f"127.0.0.1:{closed_port()}"
    monkeypatch.setenv("RAY_ADDRESS", dead)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # as a fresh `tidemark` process (the suite may hold one)
    bench = tmp_path / "b.jsonl"
    bench.write_text('{"id": "a", "input": "some text here", "label": 1}\n')
    (tmp_path / "model").mkdir()  # exists, so the job gets as far as joining Ray (a missing one is refused first)
    result = CliRunner().invoke(app, ["evaluate", "--benchmark", str(bench), "--model", str(tmp_path / "model"),
                                      "--out", str(tmp_path / "out"), "--methods", "loss", "--quiet"])
    assert result.exit_code == 2, result.output
    assert f"error: RAY_ADDRESS={dead}: no Ray cluster answers" in result.output
