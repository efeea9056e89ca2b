"""``privmob.__version__`` is read without importlib.metadata (issue 43), and says the same."""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

import privmob


def _dist_info(folder: Path, version: str, metadata: str | None = None) -> None:
    info = folder / f"privmob-{version}.dist-info"
    info.mkdir()
    text = metadata or f"Metadata-Version: 2.1\nName: privmob\nVersion: {version}\n"
    (info / "METADATA").write_text(text)


def test_the_version_is_the_installed_distributions() -> None:
    assert privmob._version() == importlib.metadata.version("privmob")
    assert privmob.__version__ == importlib.metadata.version("privmob")


def test_reading_the_version_imports_no_importlib_metadata() -> None:
    code = (
        "import sys, privmob; v = privmob.__version__; "
        "print(v, 'importlib.metadata' in sys.modules, 'email' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [importlib.metadata.version("privmob"), "False", "False"]


def test_a_distribution_first_on_the_path_is_read_as_importlib_metadata_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the headers end at the first empty line (a later "Version:" is the description's)
    _dist_info(tmp_path, "7.3.dev1", "Name: privmob\nVersion: 7.3.dev1\nSummary: x\n\nVersion: 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert privmob._version() == importlib.metadata.version("privmob") == "7.3.dev1"


def test_two_candidates_in_one_folder_are_left_to_importlib_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for version in ("9.1", "9.2"):  # importlib.metadata picks one; privmob does not guess
        _dist_info(tmp_path, version)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert privmob._version() == importlib.metadata.version("privmob")
