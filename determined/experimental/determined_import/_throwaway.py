"""A throwaway PostgreSQL server that a `pg_dump` file is restored into (`det import determined --dump FILE`):
initdb into a temporary dir, pg_ctl on a free 127.0.0.1 port, stopped by its pid and removed at the end (also
after Ctrl-C)."""
import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Iterator, List, Optional

from determined.experimental.determined_import._source import SourceError


def postgres_bin_dir() -> Optional[str]:
    """The directory of PostgreSQL's server programs (initdb, pg_ctl): on PATH, else Debian's newest."""
    found = shutil.which("initdb")
    if found:
        return os.path.dirname(os.path.realpath(found))
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(candidates[-1]) if candidates else None


def _as_owner(argv: List[str]) -> List[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@contextlib.contextmanager
def restored(dump: str) -> Iterator[str]:
    """The URL of a throwaway database holding `dump` (plain SQL, or pg_dump's custom format)."""
    if not os.path.isfile(dump):
        raise SourceError(f"--dump {dump}: no such file")
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        raise SourceError("--dump needs PostgreSQL's initdb, pg_ctl and psql/pg_restore here (apt-get install "
                          "postgresql); or restore the dump yourself and pass --db-url")
    root = tempfile.mkdtemp(prefix="det-import-pg-")
    pid: Optional[int] = None
    try:
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(root, owner.pw_uid, owner.pw_gid)
        data = os.path.join(root, "data")
        subprocess.run(_as_owner([os.path.join(bin_dir, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
                                  "-E", "UTF8", "--no-sync", "--locale=C"]),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        options = f"-c listen_addresses=127.0.0.1 -c unix_socket_directories={root} -c fsync=off -p {port}"
        result = subprocess.run(_as_owner([os.path.join(bin_dir, "pg_ctl"), "-D", data, "-l",
                                           os.path.join(root, "log"), "-w", "-t", "60", "-o", options, "start"]),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if result.returncode != 0:
            raise SourceError(f"could not start a throwaway PostgreSQL for the dump: {result.stderr.strip()}")
        with open(os.path.join(data, "postmaster.pid")) as f:
            pid = int(f.readline())
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        with open(dump, "rb") as f:
            custom = f.read(5) == b"PGDMP"
        if custom:
            argv = [os.path.join(bin_dir, "pg_restore"), "--no-owner", "--no-privileges", "-d", url, dump]
            restore = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        else:
            with open(dump, "rb") as f:
                restore = subprocess.run([os.path.join(bin_dir, "psql"), "-q", "-d", url, "-v", "ON_ERROR_STOP=0"],
                                         stdin=f, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if restore.returncode not in (0, 1):  # pg_restore exits 1 on warnings (a missing role, say)
            raise SourceError(f"could not restore {dump}: {str(restore.stderr)[-2000:]}")
        yield url
    finally:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.05)
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
