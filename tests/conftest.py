"""Shared fixtures: the real data beside the repository, temporary ledgers, engines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """``../shared/data`` beside the repository (or $PRIVMOB_SHARED_DATA)."""
    env = os.environ.get("PRIVMOB_SHARED_DATA")
    return Path(env) if env else (REPO.parent / "shared" / "data")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data folder; skips the test with a clear message when it is absent."""
    path = shared_data_dir()
    if not path.is_dir():
        pytest.skip(
            f"real data not found at {path}: these tests need ../shared/data beside the "
            "repository (or PRIVMOB_SHARED_DATA)"
        )
    return path


@pytest.fixture(autouse=True, scope="session")
def _private_data_home_of_the_session(tmp_path_factory: pytest.TempPathFactory):
    """Module-scoped fixtures run before the per-test data directory below: they too must never
    reach the real one (a ledger they create makes the user's key there)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data-session")))
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def _private_data_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """The default ledger lives in the user's data directory, the tessellation cache in the
    user's cache directory: never the real ones in tests."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
    # the tessellation cache too (privmob.data.tessellation_cache): one per test session
    monkeypatch.setenv("PRIVMOB_CACHE_DIR", str(_session_cache(tmp_path_factory)))


_CACHE: list[Path] = []


def _session_cache(factory: pytest.TempPathFactory) -> Path:
    if not _CACHE:
        _CACHE.append(factory.mktemp("privmob-cache"))
    return _CACHE[0]


@pytest.fixture
def ledger(tmp_path: Path):
    from privmob.privacy.ledger import Ledger

    return Ledger(tmp_path / "ledger.sqlite")


@pytest.fixture
def accountant(ledger):
    """An accountant with a generous budget, for tests of release mechanics."""
    from privmob.releases.base import Accountant

    return Accountant(ledger, "test", budget=1e6)


@pytest.fixture
def engine():
    from privmob.engine import DuckDBEngine

    eng = DuckDBEngine()
    yield eng
    eng.close()


# -- a real PostgreSQL server (tests/pg_cluster.py) ------------------------------------------
_PG_DBS: list[int] = []


@pytest.fixture(scope="session")
def pg_cluster():
    """A private PostgreSQL cluster for the session (started once, stopped at the end); skips
    only where no PostgreSQL binaries exist at all."""
    from tests.pg_cluster import CUSTODIAN, PgCluster, find_bindir

    bindir = find_bindir()
    if bindir is None:
        pytest.skip(
            "no PostgreSQL binaries (pg_ctl, initdb) found via pg_config, "
            "/usr/lib/postgresql/*/bin "
            "or PATH: install postgresql-15 (.ci/run does) to run the team-ledger tests"
        )
    pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
    cluster = PgCluster(bindir)
    try:
        cluster.start()
        # the custodian owns the ledger's schema and creates the analyst/auditor roles
        cluster.sql(f"CREATE ROLE {CUSTODIAN} LOGIN CREATEDB CREATEROLE")
        yield cluster
    finally:
        cluster.stop("fast")
        cluster.remove()


@pytest.fixture
def pg_url(pg_cluster) -> str:
    """A fresh database owned by the custodian: its URL (as the custodian)."""
    from tests.pg_cluster import CUSTODIAN

    _PG_DBS.append(len(_PG_DBS) + 1)
    name = f"ledger_{os.getpid()}_{len(_PG_DBS)}"
    pg_cluster.sql(f"CREATE DATABASE {name} OWNER {CUSTODIAN}")
    return pg_cluster.url(CUSTODIAN, name)
