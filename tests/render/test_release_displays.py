"""Every release kind displays itself in a notebook (``ReleaseResult._repr_html_``): a map or a
chart whose drawn values are the release's own rows (parsed from the SVG, never matched as
text), and settings whose margin and bounds rows are filled, per trip at trip level.

Before: the zone series map read 0 in every zone while its table had values (its datetime
labels and its rows were compared as different text); counts, trips-per-hour, series and the
report showed tables only; the margin row was empty for the series kinds and the report, the
bounds row for a trip-level OD matrix. The data are small and made up (fixed seeds); no
statement here is statistical.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
import pytest
from tests.helpers import random_trips
from tests.render.test_uncertainty import Recorder, fills, named_zones, number, parse

import privmob as pm


def settings(elements: list[dict]) -> dict[str, str]:
    """The settings table: row header -> value."""
    rows = {}
    for th in (e for e in elements if e["tag"] == "th"):
        cells = [e for e in elements if e["tag"] == "td" and e["parent"] is th["parent"]]
        if cells:
            rows[th["text"]] = cells[0]["text"]
    return rows


def tile_values(elements: list[dict], section: str | None = None) -> dict[str, float]:
    """Each map tile's value from its tooltip ("ZoneA: 12 count ..."): tile name -> value."""
    out = {}
    for e in elements:
        if e["tag"] != "path" or (section is not None and e["section"] != section):
            continue
        titles = [t for t in elements if t["tag"] == "title" and t["parent"] is e]
        if titles and e["attrs"].get("class") in ("pm-tile", "pm-below"):
            name, _, rest = titles[0]["text"].partition(": ")
            out[name] = number(rest)
    return out


def bar_values(elements: list[dict]) -> dict[str, float]:
    """Each bar's label and value from its tooltip ("Monday: 12 ± 15")."""
    out = {}
    for e in elements:
        if e["tag"] == "rect" and e["attrs"].get("class") in ("pm-bar", "pm-below"):
            title = next(t for t in elements if t["tag"] == "title" and t["parent"] is e)
            label, _, rest = title["text"].partition(": ")
            out[label] = number(rest)
    return out


def names_of(table: pd.DataFrame, key: str) -> dict[str, float]:
    """The table's value per zone name (named_zones: tile i is "Zone" + letter i), its rows
    outside the tiles (outliers) left out."""
    rows = table[table[key].astype(str).str.isdigit()]
    pairs = zip(rows[key], rows.iloc[:, -1], strict=True)
    return {f"Zone{chr(65 + int(z))}": float(v) for z, v in pairs}


@pytest.fixture(scope="module")
def trips_session():
    s = pm.Session(random_trips(150, 9, seed=3), tessellation=named_zones(), dataset="t",
                   budget=pm.PureDP(50), seed=1)  # fmt: skip
    yield s
    s.close()


def events(seed: int = 5, n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "uid": rng.integers(0, 150, n),
            "datetime": pd.Timestamp("2024-01-01")
            + pd.to_timedelta(rng.integers(0, 86_400, n), unit="s"),
            "lat": 52 + rng.uniform(0.0005, 0.0295, n),
            "lng": 13 + rng.uniform(0.0005, 0.0295, n),
        }
    )


def trip_points(seed: int = 7, users: int = 60) -> pd.DataFrame:
    """Two-point trips (start, end) inside the 3 x 3 zones over one week of 2024."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(users):
        for j in range(3):
            tid = u * 10 + j
            t0 = pd.Timestamp("2024-01-01") + pd.Timedelta(minutes=int(rng.integers(0, 9000)))
            for step in range(2):
                at = t0 + pd.Timedelta(minutes=20 * step)
                lat, lng = 52 + rng.uniform(0.001, 0.029), 13 + rng.uniform(0.001, 0.029)
                rows.append((u, tid, at, lat, lng))
    return pd.DataFrame(rows, columns=["uid", "tid", "datetime", "lat", "lng"])


def test_the_zone_series_map_shows_the_values_of_its_table() -> None:
    s = pm.Session(events(), tessellation=named_zones(), budget=pm.PureDP(50), dataset="ev",
                   unit=pm.PrivacyUnit.LANDMARK, seed=1)  # fmt: skip
    zs = s.series_counts(epsilon=5, period=pm.Period("2024-01-01", "2024-01-02"),
                         max_per_bin=pm.MaxVisitsPerHour(2))  # fmt: skip
    table = zs.tables["series"]
    stamps = table["timestamp"].astype(str)
    for shown, period in ((stamps.iat[0], None), (stamps.unique()[5], stamps.unique()[5])):
        want = names_of(table[stamps == shown][["zone", "value"]], "zone")
        elements = parse(zs.html(period=period))
        assert tile_values(elements) == want
        assert any(v != 0 for v in want.values())  # the table has values: the map is not blank
    rows = settings(parse(zs._repr_html_()))
    assert re.fullmatch(r"±[\d.]+ per cell, by time bin \(the budgets table\)",
                        rows["95% margin of error"])  # fmt: skip
    assert rows["bounds"]
    s.close()


def floor_of(result: Any, cells: int) -> float:
    """The noise floor of ``cells`` cells of the release's noise (the one rule of signal)."""
    from privmob.privacy.mechanisms import Noise, NoiseKind
    from privmob.privacy.signal import noise_floor

    noise = result.release.noise
    return float(noise_floor(Noise(NoiseKind(noise["kind"]), float(noise["scale"])), cells))


def coloured_only_above(elements: list[dict], floor: float, tag: str) -> None:
    """Every drawn value is coloured exactly when it clears the floor the caption states."""
    drawn = fills(elements, None, tag)
    assert drawn
    for value, _fill, cls in drawn:
        assert (cls == "pm-below") == (value <= floor), (value, floor, cls)
    assert f"noise floor {floor:,.0f}" in "".join(e["text"] for e in elements)


def reads_only_the_published_release(result: Any) -> None:
    """As tests/render/test_uncertainty.py's OD display: a display reads only the published
    tables and public parameters (and, for a report, its published ``metadata.json``)."""
    from privmob.render.release_html import release_html

    spy = Recorder(result.release)
    assert release_html(spy, result.tessellation) == release_html(
        result.release, result.tessellation
    )
    allowed = Recorder.PUBLIC | ({"metadata"} if result.kind == "report" else set())
    assert spy.read and spy.read <= allowed, spy.read - allowed


def test_counts_by_tile_are_a_map_of_one_slice(trips_session) -> None:
    cnt = trips_session.counts(epsilon=1, by=["origin", "hour"], max_records=5)
    table = cnt.tables["counts"]
    elements = parse(cnt._repr_html_())
    first = table[table["hour"] == table["hour"].iat[0]]
    assert tile_values(elements) == names_of(first[["origin", "count"]], "origin")
    assert "1 of 24" in cnt._repr_html_()  # one hour at a time, never their sum
    coloured_only_above(elements, floor_of(cnt, 9), "path")
    other = parse(cnt.html(period="7"))
    assert tile_values(other) == names_of(table[table["hour"] == 7][["origin", "count"]], "origin")
    rows = settings(elements)
    assert rows["95% margin of error"] == f"±{cnt.metadata.margin_of_error_95:,.1f} per cell"
    assert rows["bounds"] == "max_records_per_user=5, records=trips"
    reads_only_the_published_release(cnt)


def test_counts_without_tiles_and_trips_per_hour_are_bars_with_margins(trips_session) -> None:
    cnt = trips_session.counts(epsilon=1, by=["weekday", "hour"], max_records=5)
    table = cnt.tables["counts"]
    monday = table[table["weekday"] == table["weekday"].iat[0]]
    bars = bar_values(parse(cnt._repr_html_()))
    assert bars == {str(h): float(v) for h, v in zip(monday["hour"], monday["count"], strict=True)}
    tph = trips_session.trips_per_hour(epsilon=1, max_records=5)
    elements = parse(tph._repr_html_())
    t = tph.tables["counts"]
    hours = zip(t["hour"], t["count"], strict=True)
    assert bar_values(elements) == {str(h): float(v) for h, v in hours}
    whiskers = [e for e in elements if e["attrs"].get("class") == "pm-margin"]
    assert len(whiskers) == 24
    coloured_only_above(elements, floor_of(tph, 24), "rect")
    assert settings(elements)["95% margin of error"].endswith("per cell")


def test_a_series_is_a_line_with_its_band(tmp_path) -> None:
    stamps = pd.date_range("2024-01-01", periods=24, freq="1h")
    path = tmp_path / "series.csv"
    pd.DataFrame({"time": stamps, "value": [100 + 10 * i for i in range(24)]}).to_csv(
        path, index=False
    )
    s = pm.Session(random_trips(20, 9, seed=1), tessellation=named_zones(), budget=pm.PureDP(3),
                   dataset="agg", unit=pm.PrivacyUnit.LANDMARK, seed=1)  # fmt: skip
    out = s.series(path, epsilon=1, sensitivity=1, period=pm.Period("2024-01-01", "2024-01-02"),
                   freq="1h", landmarks=[3, 4])  # fmt: skip
    elements = parse(out._repr_html_())
    line = next(e for e in elements if e["tag"] == "polyline")
    ys = np.array([float(p.split(",")[1]) for p in line["attrs"]["points"].split()])
    values = out.tables["series"]["value"].to_numpy(dtype=float)
    assert len(ys) == len(values) == 24
    # the line is the values on a linear axis: y = a - b * value
    b, a = np.polyfit(values, ys, 1)
    assert b < 0 and np.allclose(ys, a + b * values, atol=0.1)
    assert any(e["attrs"].get("class") == "pm-band" for e in elements)
    rows = settings(elements)
    margin = rows["95% margin of error"]
    assert margin.startswith("±") and "by time bin" in margin
    s.close()


def test_the_report_shows_its_key_pictures() -> None:
    s = pm.Session(trip_points(), tessellation=named_zones(), budget=pm.PureDP(5), dataset="r",
                   seed=1)  # fmt: skip
    report = s.report(epsilon=2, max_trips=3, period=pm.Period("2024-01-01", "2024-01-08"))
    html = report._repr_html_()
    elements = parse(html)
    sections = {e["attrs"].get("id") for e in elements if e["tag"] == "section"}
    assert {"trips_over_time", "trips_per_hour", "visits_per_tile", "od_flows"} <= sections
    visits = report.tables["visits_per_tile"]
    assert tile_values(elements, "visits_per_tile") == names_of(visits, "tile_id")
    over_time = report.tables["trips_over_time"]
    bars = [v for v, _f, _c in fills(elements, "trips_over_time", "rect")]
    in_period = over_time[over_time["bin_start"].astype(str).str.match(r"\d{4}-")]
    assert len(in_period) == 7 and bars == [float(v) for v in in_period["trips"]]
    rows = settings(elements)
    assert re.fullmatch(r"±[\d,]+ to ±[\d,]+ per cell, by analysis", rows["95% margin of error"])
    assert rows["bounds"] == "max_trips_per_user=3, ends_per_trip=2"
    reads_only_the_published_release(report)
    s.close()


def test_trip_level_releases_state_their_bounds_per_trip() -> None:
    rides = random_trips(150, 9, seed=3).drop(columns=["uid"])
    s = pm.Session(rides, tessellation=named_zones(), budget=pm.PureDP(30), dataset="rides",
                   unit=pm.PrivacyUnit.TRIP, seed=1)  # fmt: skip
    od = s.od(epsilon=1, unit="trip", period=pm.Period("2024-01-01", "2024-01-04", bin="day"))
    tph = s.trips_per_hour(epsilon=1, unit="trip")
    for release in (od, tph):
        rows = settings(parse(release._repr_html_()))
        assert rows["bounds"].startswith("per trip: each trip is its own privacy unit; one trip "
                                         "changes the table by at most 1 (L1)")  # fmt: skip
        assert "per_user" not in rows["bounds"]
        assert rows["95% margin of error"] == "±3.0 per cell"
    s.close()


def test_a_count_table_with_a_mean_draws_its_means_with_their_margins(trips_session) -> None:
    """``value=pm.Mean``: beside the counts, a bar per cell whose mean is shown, with whiskers
    of the mean's own margin; the note says the value, its clamp and units, and how many cells
    show no mean (before, only the counts were drawn)."""
    cnt = trips_session.counts(
        epsilon=40, by=["weekday"], max_records=5, value=pm.Mean("duration", 0, 120)
    )
    table = cnt.tables["counts"]
    html = cnt._repr_html_()
    assert "pm-means" in html, "no picture of the means"
    means = parse(html[html.index("<p class='meta pm-means'>") :])
    shown = table[table["mean"].notna()]
    drawn = bar_values(means)
    assert set(drawn) == {str(w) for w in shown["weekday"]}
    for w, mean in zip(shown["weekday"], shown["mean"], strict=True):
        assert drawn[str(w)] == pytest.approx(mean, rel=0.01)
    whiskers = [e for e in means if e["attrs"].get("class") == "pm-margin"]
    assert len(whiskers) == len(shown)
    note = next(e["text"] for e in means if "clamped to [0, 120]" in e["text"])
    assert "minutes" in note and f"{len(table) - len(shown)} of {len(table)}" in note
