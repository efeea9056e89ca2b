"""Every ```python and ```bash block of README.md and docs/*.md runs as written (so the docs
cannot rot).

Each file's blocks run in document order in a fresh working directory that has the shared data
at ``../shared/data`` (as beside the repository): the python blocks in one namespace, each bash
block as ``bash -e -o pipefail`` in the same directory, with ``privmob`` and ``python`` of this
environment first on PATH and ``uv run [options] CMD`` running CMD there. A file whose blocks
use ``../shared/data`` is skipped, with a message, when the data is absent.

A block that cannot run here (a cluster, a bucket, an install from PyPI, the whole test suite,
an hours-long benchmark) says so on the line before it: ``<!-- no-run: the reason -->``. Those
are counted by :func:`test_few_blocks_are_not_run`; output and snippets belong in ```text.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import shared_data_dir

ROOT = Path(__file__).resolve().parents[2]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)
#: a python or bash block, with the line before it (a no-run mark)
ANY_BLOCK = re.compile(
    r"(?:^<!-- no-run: ([^\n]*?) -->\n)?^```(python|bash)[^\n]*\n(.*?)^```", re.S | re.M
)
#: the blocks that do not run, at most (each with its reason in the page)
MAX_NOT_RUN = 8

#: ``uv run [--options] CMD ...`` -> ``CMD ...`` in this environment (``--group dev`` and
#: ``--with x`` take a value)
UV_SHIM = """#!/bin/sh
[ "$1" = run ] || { echo "docs tests: only 'uv run' is available" >&2; exit 2; }
shift
while [ $# -gt 0 ]; do
  case "$1" in
    --group|--with|--extra|--python) shift 2 ;;
    --*) shift ;;
    *) break ;;
  esac
done
exec "$@"
"""


def python_blocks(path: Path) -> list[str]:
    return BLOCK.findall(path.read_text())


#: sections whose blocks run in a test of their own, in the environment they need (a key folder,
#: a private PostgreSQL server): (page, heading) -> that test
OWN_RUNNERS = {
    ("operations.md", "## Keys, roles and a team ledger"): "test_operations_ledger_bash.py",
    ("operations.md", "## A team ledger on PostgreSQL"): "test_operations_postgres_bash.py",
}


def _own_sections(path: Path, text: str) -> list[tuple[int, int]]:
    """The spans of ``path``'s sections that :data:`OWN_RUNNERS` run."""
    spans = []
    for (page, heading), runner in OWN_RUNNERS.items():
        if path.name != page or heading not in text:
            continue
        assert (Path(__file__).parent / runner).exists(), runner
        start = text.index(heading)
        end = text.find("\n## ", start + len(heading))
        spans.append((start, end if end > 0 else len(text)))
    return spans


def blocks(path: Path) -> list[tuple[str, str, str | None]]:
    """(language, code, no-run reason or None) of each python and bash block, in order (those of
    sections with a runner of their own, :data:`OWN_RUNNERS`, left to it)."""
    text = path.read_text()
    spans = _own_sections(path, text)
    return [
        (m.group(2), m.group(3), m.group(1))
        for m in ANY_BLOCK.finditer(text)
        if not any(a <= m.start() < b for a, b in spans)
    ]


def test_block_extraction() -> None:
    text = "a\n```python\nx = 1\n```\n```text\ny\n```\n```python\nz = 2\n```\n"
    assert BLOCK.findall(text) == ["x = 1\n", "z = 2\n"]
    text += "<!-- no-run: a cluster -->\n```bash\nspark-submit x\n```\n```bash\nls\n```\n"
    assert [(lang, why) for lang, _, why in blocks_of(text)] == [
        ("python", ""), ("python", ""), ("bash", "a cluster"), ("bash", "")
    ]  # fmt: skip


def blocks_of(text: str) -> list[tuple[str, str, str]]:
    return [(lang, code, why) for why, lang, code in ANY_BLOCK.findall(text)]


def test_few_blocks_are_not_run() -> None:
    marked = [(f.name, why) for f in FILES for _, _, why in blocks(f) if why]
    assert all(len(why) > 10 for _, why in marked), marked  # each says why
    assert len(marked) <= MAX_NOT_RUN, marked


def _shim_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    uv = bin_dir / "uv"
    uv.write_text(UV_SHIM)
    uv.chmod(0o755)
    return bin_dir


#: the pages with a block to run (a page whose every block is marked no-run, such as the
#: benchmark pages' commands, has nothing to run here: test_few_blocks_are_not_run counts them)
RUN = [f for f in FILES if any(not why for _, _, why in blocks(f))]


@pytest.mark.parametrize("doc", RUN, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_blocks_run(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    todo = [(lang, code) for lang, code, why in blocks(doc) if not why]
    data = shared_data_dir()
    if any("shared/data" in code for _, code in todo) and not data.is_dir():
        pytest.skip(f"{doc.name} uses ../shared/data, which is absent ({data})")
    work = tmp_path / "repo"
    work.mkdir()
    if data.is_dir():
        (tmp_path / "shared").mkdir()
        os.symlink(data, tmp_path / "shared" / "data")
    monkeypatch.chdir(work)
    monkeypatch.setenv("PRIVMOB_LEDGER", str(tmp_path / "default-ledger.sqlite"))
    path = os.pathsep.join([str(_shim_bin(tmp_path)), str(Path(sys.executable).parent)])
    env = {**os.environ, "PATH": path + os.pathsep + os.environ.get("PATH", "")}
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for i, (lang, code) in enumerate(todo, 1):
        where = f"{doc.relative_to(ROOT)}, {lang} block {i}"
        if lang == "python":
            try:
                exec(compile(code, where, "exec"), namespace)
            except Exception as exc:
                pytest.fail(f"{where} failed: {exc!r}")
            continue
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", code],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            pytest.fail(
                f"{where} exited {done.returncode}:\n{code}\n--- stderr\n{done.stderr[-3000:]}"
            )
