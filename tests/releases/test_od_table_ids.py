"""The OD table keeps the type of the tile ids, so it merges with the tessellation."""

import numpy as np
import pandas as pd
from tests.helpers import box_grid

from privmob.releases.od import od_table


def test_integer_tile_ids_stay_integers_and_merge_with_the_tessellation(tmp_path):
    tess = box_grid(3)
    od = np.arange(2 * 9 * 9).reshape(2, 9, 9)
    table = od_table(od, tess.tile_ids, ["2024-01-01", "2024-01-02"])
    table.to_parquet(tmp_path / "od.parquet")
    back = pd.read_parquet(tmp_path / "od.parquet")
    assert back["origin"].dtype == np.int64 and back["destination"].dtype == np.int64
    merged = back.merge(tess.gdf, left_on="origin", right_on="tile_id", validate="many_to_one")
    assert len(merged) == len(back) == 2 * 9 * 8
    assert back["period"].map(type).eq(str).all()


def test_string_tile_ids_stay_strings():
    table = od_table(np.ones((1, 3, 3), dtype=np.int64), ["a", "b", "c"], ["all"])
    assert table["origin"].tolist() == ["a", "a", "b", "b", "c", "c"]
    assert table["destination"].tolist() == ["b", "c", "a", "c", "a", "b"]
