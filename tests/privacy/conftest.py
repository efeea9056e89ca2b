"""Ledger fixtures over both stores: an SQLite file and a database of the session's private
PostgreSQL cluster (tests/pg_cluster.py)."""

from __future__ import annotations

import pytest

STORES = ["sqlite", "postgresql"]


def ledger_location(store: str, request: pytest.FixtureRequest, tmp_path) -> str:
    """A new ledger's location in ``store``: a file, or a fresh database's URL (custodian)."""
    if store == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(params=STORES)
def ledger_at(request: pytest.FixtureRequest, tmp_path) -> str:
    """Where a new ledger is, once per store (the same semantics must hold in both)."""
    return ledger_location(request.param, request, tmp_path)
