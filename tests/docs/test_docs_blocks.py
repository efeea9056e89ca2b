"""Every ```python block of README.md and docs/*.md runs as written (so the docs cannot rot).

Each file's blocks run in order in one namespace, in a fresh working directory that has the
shared data at ``../shared/data`` (as beside the repository). A file whose blocks use
``../shared/data`` is skipped, with a message, when the data is absent. Snippets that cannot run
here (a cluster, a bucket) belong in ```text blocks.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conftest import shared_data_dir

ROOT = Path(__file__).resolve().parents[2]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)


def python_blocks(path: Path) -> list[str]:
    return BLOCK.findall(path.read_text())


def test_block_extraction() -> None:
    text = "a\n```python\nx = 1\n```\n```text\ny\n```\n```python\nz = 2\n```\n"
    assert BLOCK.findall(text) == ["x = 1\n", "z = 2\n"]


@pytest.mark.parametrize(
    "doc", [f for f in FILES if python_blocks(f)], ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_python_blocks_run(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = python_blocks(doc)
    data = shared_data_dir()
    if any("shared/data" in b for b in blocks) and not data.is_dir():
        pytest.skip(f"{doc.name} uses ../shared/data, which is absent ({data})")
    work = tmp_path / "repo"
    work.mkdir()
    if data.is_dir():
        (tmp_path / "shared").mkdir()
        os.symlink(data, tmp_path / "shared" / "data")
    monkeypatch.chdir(work)
    monkeypatch.setenv("PRIVMOB_LEDGER", str(tmp_path / "default-ledger.sqlite"))
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for i, code in enumerate(blocks, 1):
        try:
            exec(compile(code, f"{doc.name}, python block {i}", "exec"), namespace)
        except Exception as exc:
            pytest.fail(f"{doc.relative_to(ROOT)}, python block {i} failed: {exc!r}")
