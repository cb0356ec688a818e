"""Fixtures of the source tests."""
from __future__ import annotations

import socket

import pytest


@pytest.fixture
def no_network(monkeypatch):
    """Any real connection attempt fails the test: everything must come from fixtures (moto answers inside
    botocore, without a socket)."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args[1:]!r}")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
