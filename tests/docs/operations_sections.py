"""The ```bash blocks of one section of docs/operations.md, run as written: in order, in one
shell (``set -euo pipefail``), in a folder of the test's, with a private data directory and
this Python's ``privmob`` first on the PATH."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASH_BLOCK = re.compile(r"^```bash[^\n]*\n(.*?)^```", re.S | re.M)


def section_blocks(section: str) -> list[str]:
    """The ```bash blocks between the heading ``section`` of docs/operations.md and the next
    heading of its level, in order."""
    text = (ROOT / "docs" / "operations.md").read_text()
    start = text.index(section)
    end = text.find("\n## ", start + len(section))
    return BASH_BLOCK.findall(text[start : end if end > 0 else None])


def run_section(
    section: str,
    folder: Path,
    *,
    unset: tuple[str, ...] = ("PRIVMOB_",),
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the blocks of ``section`` in ``folder``, without the environment variables whose
    names start with ``unset``, with ``XDG_DATA_HOME`` in ``folder/home`` and ``env`` added."""
    child = {k: v for k, v in os.environ.items() if not k.startswith(unset)}
    child["XDG_DATA_HOME"] = str(folder / "home")
    child["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{child.get('PATH', '')}"
    child.update(env or {})
    script = "set -euo pipefail\n" + "\n".join(section_blocks(section))
    return subprocess.run(
        ["bash", "-c", script], cwd=folder, env=child, capture_output=True, text=True
    )
