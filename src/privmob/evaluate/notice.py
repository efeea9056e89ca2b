"""The notice every evaluation output carries: it compares private with exact results.

Evaluation commands (``privmob evaluate ...``) read the exact data, spend no budget and write
no release. Their tables and plots are therefore NOT differentially private; the files say so
themselves, so that nobody mistakes a results folder for something publishable.
"""

from __future__ import annotations

from pathlib import Path

NOT_PRIVATE = (
    "NOT DIFFERENTIALLY PRIVATE: these results compare private outputs with the exact data "
    "(no privacy budget was charged). For the data holder choosing parameters only; do not "
    "publish them."
)
NOTICE_FILE = "NOT_PRIVATE.txt"


def write_notice(outdir: Path) -> Path:
    """Write :data:`NOT_PRIVATE` to ``outdir/NOT_PRIVATE.txt`` and return the path."""
    path = Path(outdir) / NOTICE_FILE
    path.write_text(NOT_PRIVATE + "\n")
    return path
