"""A real PostgreSQL server for the tests: one per session on a free loopback
port (``tools/local_postgres.py``), a fresh database per test."""
import os

import pytest

from local_postgres import LocalPostgres, bindir


@pytest.fixture(scope="session")
def postgres_server():
    if bindir() is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is missing under CI (make test installs it as root)")
        pytest.skip("PostgreSQL not installed (apt-get install postgresql)")
    server = LocalPostgres().start()
    yield server
    server.stop()


@pytest.fixture
def pg_url(postgres_server):
    """URL of a fresh, empty database."""
    return postgres_server.new_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path):
    """A store location of each kind: a SQLite file, a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "s.sqlite")
    return request.getfixturevalue("pg_url")
