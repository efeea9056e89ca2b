"""The ```bash blocks of docs/operations.md's section on the ledger's keys and roles run as
written, in order, in one shell (``set -euo pipefail``) in a fresh folder with a private data
directory: key creation, a team's grants, an analyst refused, an auditor's verify, checkpoint,
rotation and a backup custodian key."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Keys, roles and a team ledger"
BLOCK = re.compile(r"^```bash[^\n]*\n(.*?)^```", re.S | re.M)


def section_blocks() -> list[str]:
    text = (ROOT / "docs" / "operations.md").read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return BLOCK.findall(text[start : end if end > 0 else None])


def test_the_section_has_blocks() -> None:
    assert len(section_blocks()) >= 5


def test_the_ledger_bash_blocks_run(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVMOB_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "home")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    script = "set -euo pipefail\n" + "\n".join(section_blocks())
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "verifies" in done.stdout
    assert (tmp_path / "home" / "privmob" / "keys" / "key.pem").exists()  # the single user's
    assert (os.stat(tmp_path / "custodian.pem").st_mode & 0o777) == 0o600
