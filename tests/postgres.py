"""A real PostgreSQL server (Debian's package) on a free loopback port, started
by the tests: one server per session, a fresh database per test."""
import glob
import itertools
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from brokers import free_port


def _bindir():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    exe = shutil.which("initdb")
    return os.path.dirname(exe) if exe else None


class Postgres:
    """initdb + postgres as the ``postgres`` user when we are root (the server
    refuses to run as root), trust authentication on 127.0.0.1 only."""

    def __init__(self, root):
        self.bindir = _bindir()
        if self.bindir is None:
            if os.environ.get("CI"):
                pytest.fail("PostgreSQL is missing under CI (make test installs it as root)")
            pytest.skip("PostgreSQL not installed (apt-get install postgresql)")
        self.root, self.port = root, free_port()
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(root, "postgres")
        self.names = itertools.count()

    def _run(self, *cmd):
        subprocess.run(self.as_user + [os.path.join(self.bindir, cmd[0]), *cmd[1:]], check=True,
                       capture_output=True, text=True)

    def start(self):
        data = os.path.join(self.root, "data")
        self._run("initdb", "-D", data, "-U", "mss", "-A", "trust", "--no-sync")
        self.proc = subprocess.Popen(
            self.as_user + [os.path.join(self.bindir, "postgres"), "-D", data, "-p", str(self.port),
                            "-h", "127.0.0.1", "-k", str(self.root), "-c", "fsync=off",
                            "-c", "max_connections=50"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.root, "server.log"), "wb"))
        import psycopg

        deadline = time.time() + 30
        while True:
            try:
                psycopg.connect(self.url("postgres")).close()
                return self
            except psycopg.OperationalError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(open(os.path.join(self.root, "server.log")).read()[-2000:])
                time.sleep(0.2)

    def url(self, db):
        return f"postgresql://mss@127.0.0.1:{self.port}/{db}"

    def new_database(self):
        import psycopg

        name = f"t{next(self.names)}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


@pytest.fixture(scope="session")
def postgres_server():
    # not under pytest's 0700 basetemp: the server runs as the postgres user
    root = tempfile.mkdtemp(prefix="mss-pg-")
    os.chmod(root, 0o755)
    try:
        server = Postgres(root).start()
        yield server
        server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(postgres_server):
    """URL of a fresh, empty database."""
    return postgres_server.new_database()
