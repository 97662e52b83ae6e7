"""A pytest fixture under which opening any network connection fails the test.

Replaces ``socket.socket.connect``/``connect_ex``, ``socket.create_connection`` and
``socket.getaddrinfo``: each attempt raises, and is recorded so that the test fails
at teardown even if the code under test caught the error and carried on (a library
falling back to its cache after a failed request would otherwise pass unnoticed).
Use it with ``@pytest.mark.usefixtures("no_network")`` or as an argument; a
conftest makes it visible by importing it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest


class NetworkAttempted(AssertionError):
    """Raised in place of any connection or name lookup while the guard is on."""


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Forbid sockets for one test; yields the list of attempts (empty when all is well)."""
    attempts: list[str] = []

    def refuse(what: str) -> Any:
        def guard(*args: Any, **kwargs: Any) -> Any:
            shown = [a for a in args if not isinstance(a, socket.socket)]
            attempts.append(f"{what}{tuple(shown)!r}")
            raise NetworkAttempted(f"network used under no_network: {what}{tuple(shown)!r}")

        return guard

    monkeypatch.setattr(socket.socket, "connect", refuse("socket.connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("socket.connect_ex"))
    monkeypatch.setattr(socket, "create_connection", refuse("socket.create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("socket.getaddrinfo"))
    yield attempts
    if attempts:
        pytest.fail(f"network used under no_network: {attempts}")
