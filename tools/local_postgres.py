"""A throw-away PostgreSQL server on a free loopback port (tests, benchmarks).

Uses Debian's binaries (``/usr/lib/postgresql/<v>/bin``): ``initdb`` with
trust authentication for 127.0.0.1 only, then ``postgres``; as root both
run as the ``postgres`` user, since the server refuses to run as root.
"""
import glob
import itertools
import os
import shutil
import subprocess
import tempfile
import time

from mss_aggregator.ports import free_port


def bindir():
    """The directory of initdb/postgres, or None when PostgreSQL is not installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    exe = shutil.which("initdb")
    return os.path.dirname(exe) if exe else None



class LocalPostgres:
    def __init__(self, fsync=False):
        self.bindir = bindir()
        if self.bindir is None:
            raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
        self.root = tempfile.mkdtemp(prefix="mss-pg-")
        os.chmod(self.root, 0o755)  # the server user must reach it
        self.port, self.fsync = free_port(), fsync
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.root, "postgres")
        self.names = itertools.count()
        self.proc = None

    def start(self):
        data = os.path.join(self.root, "data")
        subprocess.run(self.as_user + [os.path.join(self.bindir, "initdb"), "-D", data, "-U", "mss",
                                       "-A", "trust", "--no-sync"], check=True, capture_output=True)
        log = os.path.join(self.root, "server.log")
        for attempt in range(5):
            if self._serve(data, log):
                return self
            # the port was taken between free_port() and the bind (parallel test workers, other
            # processes): another one
            if attempt == 4 or "already in use" not in open(log).read():
                self.stop()
                raise RuntimeError(f"PostgreSQL did not start: {open(log).read()[-2000:]}")
            self.port = free_port()

    def _serve(self, data, log):
        """Start the server on self.port: True once it accepts connections, False if it exited."""
        import psycopg

        self.proc = subprocess.Popen(
            self.as_user + [os.path.join(self.bindir, "postgres"), "-D", data, "-p", str(self.port),
                            "-h", "127.0.0.1", "-k", self.root, "-c", f"fsync={'on' if self.fsync else 'off'}",
                            "-c", "max_connections=50"],
            stdout=subprocess.DEVNULL, stderr=open(log, "wb"))
        deadline = time.time() + 30
        while True:
            if self.proc.poll() is not None:
                return False
            if time.time() > deadline:
                self.stop()
                raise RuntimeError(f"PostgreSQL did not start: {open(log).read()[-2000:]}")
            try:
                with psycopg.connect(self.url("postgres")) as c:  # ours, not another server on the port
                    if os.path.samefile(c.execute("SHOW data_directory").fetchone()[0], data):
                        return True
            except psycopg.OperationalError:
                pass
            time.sleep(0.2)

    def url(self, db):
        return f"postgresql://mss@127.0.0.1:{self.port}/{db}"

    def new_database(self):
        """URL of a fresh, empty database."""
        import psycopg

        name = f"t{next(self.names)}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        shutil.rmtree(self.root, ignore_errors=True)
