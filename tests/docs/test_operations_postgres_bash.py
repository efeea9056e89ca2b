"""The ```bash blocks of docs/operations.md's section on a team ledger on PostgreSQL run as
written, in order, in one shell (``set -euo pipefail``), against the session's private
PostgreSQL cluster (tests/pg_cluster.py): the administrator's roles and database, the
custodian's ledger and grants, an analyst refused by the server and by privmob, an auditor's
verify, export and import."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## A team ledger on PostgreSQL"
BLOCK = re.compile(r"^```bash[^\n]*\n(.*?)^```", re.S | re.M)


def section_blocks() -> list[str]:
    text = (ROOT / "docs" / "operations.md").read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return BLOCK.findall(text[start : end if end > 0 else None])


def test_the_section_has_blocks() -> None:
    assert len(section_blocks()) >= 5


def test_the_postgres_bash_blocks_run(tmp_path: Path, pg_cluster) -> None:
    from tests.pg_cluster import SUPERUSER

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRIVMOB_", "PG"))}
    env["XDG_DATA_HOME"] = str(tmp_path / "home")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PGADMIN_URL"] = pg_cluster.url(SUPERUSER, "postgres")
    env["PGHOSTPORT"] = f"127.0.0.1:{pg_cluster.port}"
    script = "set -euo pipefail\n" + "\n".join(section_blocks())
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "verifies" in done.stdout and "permission denied" in done.stderr
    assert (os.stat(tmp_path / "team.json").st_mode & 0o777) == 0o600
    assert (tmp_path / "team-copy.sqlite").exists()
