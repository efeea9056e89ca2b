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
