"""The output check refuses a target whose disk has too little room for the public domain."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import settle_by_hand

from privmob.releases.publish import BYTES_PER_CELL, Output, PublishError


def test_space_is_estimated_from_the_public_domain(tmp_path: Path) -> None:
    import os

    st = os.statvfs(tmp_path)
    free_cells = st.f_bavail * st.f_frsize // BYTES_PER_CELL
    Output(tmp_path / "ok").check(cells=1000)  # a small domain fits
    with pytest.raises(PublishError, match="free; the release needs"):
        Output(tmp_path / "big").check(cells=2 * free_cells)
    assert not (tmp_path / "ok").exists() and not (tmp_path / "big").exists()  # nothing made


def test_a_missing_parent_is_not_created_by_the_check(tmp_path: Path) -> None:
    Output(tmp_path / "a" / "b" / "out").check()
    assert not (tmp_path / "a").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(PublishError, match="is a file"):
        Output(tmp_path / "file" / "out").check()


def test_an_empty_folder_at_the_target_is_replaced_by_the_release(tmp_path: Path) -> None:
    import pandas as pd

    from privmob.privacy.costs import Cost, PrivacyUnit
    from privmob.privacy.ledger import Ledger
    from privmob.releases.base import Accountant
    from privmob.releases.release import Release

    (tmp_path / "out").mkdir()
    out = Output(tmp_path / "out").check()
    acct = Accountant(Ledger(tmp_path / "l.sqlite"), "d", budget=1.0, output=out)
    rel = Release(
        "counts",
        Cost.pure(0.5, PrivacyUnit.USER),
        PrivacyUnit.USER,
        {},
        {},
        {},
        {},
        {"t": pd.DataFrame({"a": [1]})},
    )
    settle_by_hand(rel, acct)
    assert {p.name for p in out.written} == {"t.parquet", "metadata.json"}
    assert Ledger(tmp_path / "l.sqlite").spent("d").epsilon == 0.5
