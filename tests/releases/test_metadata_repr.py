"""``repr(result.metadata)`` shows what ``metadata.json`` shows (issue 38): the ledger entries
as published, never the input's fingerprint, its exact row count or the entry's row hash (which
covers them), all of which the ledger keeps. Before, the entries' dataclass repr printed them
in every notebook that displayed the metadata."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from tests.helpers import box_grid

import privmob as pm
from privmob.privacy.ledger import Ledger


def test_the_metadata_repr_hides_the_private_fields(tmp_path):
    rng = np.random.default_rng(8)
    n = 137
    pd.DataFrame(
        {
            "uid": rng.integers(0, 30, n),
            "datetime": pd.Timestamp("2024-01-01")
            + pd.to_timedelta(rng.integers(0, 86_400, n), unit="s"),
            "lat": 52.0005 + rng.random(n) * 0.029,
            "lng": 13.0005 + rng.random(n) * 0.029,
        }
    ).to_csv(tmp_path / "events.csv", index=False)
    ledger = tmp_path / "l.sqlite"
    with pm.Session(
        str(tmp_path / "events.csv"), tessellation=box_grid(3).gdf, budget=5, dataset="ev",
        ledger=str(ledger),
    ) as s:  # fmt: skip
        result = s.population(epsilon=1, output=tmp_path / "out")
    entry = Ledger(ledger).entries("ev")[0]
    private = [entry.provenance["input_fingerprint"], entry.row_hash]
    assert entry.provenance["input_rows"] == n and all(private)
    shown = repr(result.metadata)
    for secret in private:
        assert secret[-16:] not in shown
    assert "input_rows" not in shown and "input_fingerprint" not in shown
    # what it does show: the published entry, as metadata.json has it
    published = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert repr(published["ledger_entries"][0]["description"]) in shown
    assert f"'id': {entry.id}" in shown and "'epsilon': 1" in shown
    assert repr(result.metadata.provenance) in shown
