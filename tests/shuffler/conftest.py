"""The ``shuffler`` fixture: a shuffler process pinned to the test server's identity."""

import pytest
from shuffler_helpers import _spawn_shuffler
from tests_helpers import free_port


@pytest.fixture
def shuffler(server, tmp_path):
    port = free_port()
    db = str(tmp_path / "shuffler.db")
    proc = _spawn_shuffler(server, db, port, 20)
    yield f"http://127.0.0.1:{port}", db, proc
    proc.kill()
    proc.wait()
