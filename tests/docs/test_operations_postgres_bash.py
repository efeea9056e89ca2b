"""The ```bash blocks of docs/operations.md's section on a team ledger on PostgreSQL run as
written, in order, in one shell (``set -euo pipefail``), against the session's private
PostgreSQL cluster (tests/pg_cluster.py): the administrator's roles and database, the
custodian's ledger and grants, an analyst refused by the server and by privmob, an auditor's
verify, export and import."""

from __future__ import annotations

import os
from pathlib import Path

from tests.docs.operations_sections import run_section, section_blocks

SECTION = "## A team ledger on PostgreSQL"


def test_the_section_has_blocks() -> None:
    assert len(section_blocks(SECTION)) >= 5


def test_the_postgres_bash_blocks_run(tmp_path: Path, pg_cluster) -> None:
    from tests.pg_cluster import SUPERUSER

    pg = {
        "PGADMIN_URL": pg_cluster.url(SUPERUSER, "postgres"),
        "PGHOSTPORT": f"127.0.0.1:{pg_cluster.port}",
    }
    done = run_section(SECTION, tmp_path, unset=("PRIVMOB_", "PG"), env=pg)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "verifies" in done.stdout and "permission denied" in done.stderr
    assert (os.stat(tmp_path / "team.json").st_mode & 0o777) == 0o600
    assert (tmp_path / "team-copy.sqlite").exists()
