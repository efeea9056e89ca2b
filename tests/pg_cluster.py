"""A private PostgreSQL cluster for the tests: initdb and pg_ctl in a temporary directory, run
as an unprivileged OS user (PostgreSQL refuses to run as root), listening on a free loopback
port with its unix sockets in the private directory; stopped at the end of the session.

The binaries are found with ``pg_config --bindir``, in ``/usr/lib/postgresql/*/bin`` (Debian's
packages, newest first) or on PATH. :func:`find_bindir` returns None only where none exist, and
the fixtures skip then with that message.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

#: the OS user that runs the cluster when the tests run as root (created if missing)
SERVICE_USER = "privmob-pg"
SUPERUSER = "pgsuper"  # the cluster's bootstrap superuser (initdb -U)
CUSTODIAN = "custodian"  # a login role with CREATEDB and CREATEROLE, not a superuser


def find_bindir() -> Path | None:
    """Where pg_ctl and initdb are (None: no PostgreSQL binaries on this machine)."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
            candidates.append(Path(out))
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += [Path(p) for p in sorted(versions, key=_version, reverse=True)]
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for d in candidates:
        if (d / "pg_ctl").is_file() and (d / "initdb").is_file() and (d / "postgres").is_file():
            return d
    return None


def _version(path: str) -> float:
    try:
        return float(Path(path).parent.name)
    except ValueError:
        return 0.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _service_user() -> tuple[int, int] | None:
    """(uid, gid) to run the server as; None when the tests are not root (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                SERVICE_USER,
            ],
            check=True,
            capture_output=True,
        )
        pw = pwd.getpwnam(SERVICE_USER)
    return pw.pw_uid, pw.pw_gid


class PgCluster:
    """One private cluster; :meth:`start`, :meth:`stop`, :meth:`url` for a role and database."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.ids = _service_user()
        self.root = Path(tempfile.mkdtemp(prefix="privmob-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sockets"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self.sockets.mkdir()
        if self.ids is not None:
            for p in (self.root, self.sockets):
                os.chown(p, *self.ids)
        os.chmod(self.root, 0o700)
        self._run(
            [
                str(bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                "--auth=trust",  # loopback and the private socket directory only (see start)
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ]
        )

    def _run(self, cmd: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
        if self.ids is not None:  # as the unprivileged service user, never as root
            cmd = [
                "setpriv",
                f"--reuid={self.ids[0]}",
                f"--regid={self.ids[1]}",
                "--clear-groups",
                *cmd,
            ]
        env = {**os.environ, "LC_ALL": "C"}
        return subprocess.run(
            cmd, capture_output=True, text=True, check=check, env=env, timeout=120
        )

    def start(self) -> None:
        opts = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories='{self.sockets}' -c fsync=off "
            "-c max_connections=120 -c shared_buffers=32MB"
        )
        self._run(
            [
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-o",
                opts,
                "-w",
                "start",
            ]
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(self.url(SUPERUSER, "postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop_command(self, mode: str = "fast") -> list[str]:
        """The command that stops the server (as its service user): ``mode`` fast (clean) or
        immediate (a crash: no shutdown checkpoint)."""
        cmd = [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"]
        if self.ids is not None:
            cmd = [
                "setpriv",
                f"--reuid={self.ids[0]}",
                f"--regid={self.ids[1]}",
                "--clear-groups",
                *cmd,
            ]
        return cmd

    def stop(self, mode: str = "fast") -> None:
        subprocess.run(self.stop_command(mode), capture_output=True, check=False, timeout=120)

    def running(self) -> bool:
        return (
            self._run(
                [str(self.bindir / "pg_ctl"), "-D", str(self.data), "status"], check=False
            ).returncode
            == 0
        )

    def url(self, user: str, dbname: str) -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}"

    def sql(self, statement: str, dbname: str = "postgres", user: str = SUPERUSER) -> None:
        import psycopg

        with psycopg.connect(self.url(user, dbname), autocommit=True) as con:
            con.execute(statement)  # type: ignore[arg-type]

    def remove(self) -> None:
        if self.running():
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
