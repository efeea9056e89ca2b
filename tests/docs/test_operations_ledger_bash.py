"""The ```bash blocks of docs/operations.md's section on the ledger's keys and roles run as
written, in order, in one shell (``set -euo pipefail``) in a fresh folder with a private data
directory: key creation, a team's grants, an analyst refused, an auditor's verify, checkpoint,
rotation and a backup custodian key."""

from __future__ import annotations

import os
from pathlib import Path

from tests.docs.operations_sections import run_section, section_blocks

SECTION = "## Keys, roles and a team ledger"


def test_the_section_has_blocks() -> None:
    assert len(section_blocks(SECTION)) >= 5


def test_the_ledger_bash_blocks_run(tmp_path: Path) -> None:
    done = run_section(SECTION, tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "verifies" in done.stdout
    assert (tmp_path / "home" / "privmob" / "keys" / "key.pem").exists()  # the single user's
    assert (os.stat(tmp_path / "custodian.pem").st_mode & 0o777) == 0o600
