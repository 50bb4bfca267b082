"""The `own_mlflow_server` fixture: a real `mlflow server` this test owns (tests/own_server.py)."""

from __future__ import annotations

from typing import Iterator

import pytest

from own_server import OwnServer


@pytest.fixture
def own_mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnServer]:
    """A started `OwnServer`, killed at the end of the test whatever happened."""
    server = OwnServer(tmp_path_factory.mktemp("own-mlflow-server"))
    try:
        server.start()
        yield server
    finally:
        server.kill()
