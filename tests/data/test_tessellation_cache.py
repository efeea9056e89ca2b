"""The tessellation cache: a file read and checked once is read back from the cache, equal in
every respect; an edited file, other options, a broken entry or an unusable directory never
give a wrong tessellation, and never fail a release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import shapely
from tests.helpers import box_grid

import privmob.data.tessellation_input as tessellation_input
from privmob.data.tessellation_cache import ENTRY_SUFFIX, cache_dir, entry_bytes
from privmob.errors import InputError


def _zones(path: Path, shift: float = 0.0) -> Path:
    """Three irregular polygons (no grid), with ids and names."""
    feats = []
    for i in range(3):
        x = 13.0 + 0.01 * i
        ring = [[x, 52.0], [x + 0.01, 52.0], [x + 0.01, 52.01 + shift * (i == 1)], [x, 52.012]]
        feats.append(
            {
                "type": "Feature",
                "properties": {"zone_id": 10 + i, "name": f"zone {i}"},
                "geometry": {"type": "Polygon", "coordinates": [[*ring, ring[0]]]},
            }
        )
    path.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    return path


def _entries() -> list[Path]:
    folder = cache_dir()
    return sorted(folder.glob(f"*{ENTRY_SUFFIX}")) if folder and folder.exists() else []


def _same(a, b) -> None:
    assert list(a.tile_ids) == list(b.tile_ids)
    assert list(a.gdf.columns) == list(b.gdf.columns)
    if "tile_name" in a.gdf.columns:
        assert list(a.gdf["tile_name"]) == list(b.gdf["tile_name"])
    assert all(shapely.equals_exact(a.gdf.geometry.values, b.gdf.geometry.values, 0))
    assert a.fingerprint == b.fingerprint and a.gdf.crs == b.gdf.crs
    assert a.attributes == b.attributes  # the public columns a hierarchy groups tiles by


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVMOB_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_second_load_reads_the_cache_and_gives_the_same_tessellation(
    tmp_path, cache, monkeypatch
):
    path = _zones(tmp_path / "zones.geojson")
    first = tessellation_input.load_tessellation(path)
    assert len(_entries()) == 1 and cache.stat().st_mode & 0o777 == 0o700
    assert first.attributes == {"name": ["zone 0", "zone 1", "zone 2"]}

    def no_parsing(*args, **kwargs):
        raise AssertionError("the file was parsed again")

    monkeypatch.setattr(tessellation_input, "read_features", no_parsing)
    _same(tessellation_input.load_tessellation(path), first)


def test_a_grid_keeps_its_arithmetic_assignment_from_the_cache(tmp_path, cache):
    path = tmp_path / "grid.geojson"
    box_grid(4).gdf.to_file(path, driver="GeoJSON")
    first = tessellation_input.load_tessellation(path)
    again = tessellation_input.load_tessellation(path)
    assert first.grid is not None and again.grid is not None
    assert (again.grid.lng_edges == first.grid.lng_edges).all()
    assert (again.grid.lat_edges == first.grid.lat_edges).all()
    _same(again, first)


def test_an_edited_file_or_other_options_are_read_anew(tmp_path, cache):
    path = _zones(tmp_path / "zones.geojson")
    before = tessellation_input.load_tessellation(path)
    _zones(path, shift=0.004)  # one vertex moved: same ids and names
    after = tessellation_input.load_tessellation(path)
    assert after.fingerprint != before.fingerprint and len(_entries()) == 2
    named = tessellation_input.load_tessellation(path, id_column="name")
    assert list(named.tile_ids) == ["zone 0", "zone 1", "zone 2"] and len(_entries()) == 3


def test_a_refused_file_is_refused_every_time(tmp_path, cache):
    path = tmp_path / "overlap.geojson"
    box = [[13.0, 52.0], [13.01, 52.0], [13.01, 52.01], [13.0, 52.01], [13.0, 52.0]]
    feats = [
        {"type": "Feature", "properties": {"tile_id": i}, "geometry": {"type": "Polygon",
         "coordinates": [box]}} for i in range(2)
    ]  # fmt: skip
    path.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    for _ in range(2):
        with pytest.raises(InputError, match="overlap"):
            tessellation_input.load_tessellation(path)
    assert _entries() == []


def test_a_broken_entry_is_read_around_and_replaced(tmp_path, cache):
    path = _zones(tmp_path / "zones.geojson")
    first = tessellation_input.load_tessellation(path)
    (entry,) = _entries()
    entry.write_bytes(b"not an entry")
    _same(tessellation_input.load_tessellation(path), first)
    assert entry.read_bytes() == entry_bytes(first)  # rewritten whole


def test_an_unusable_directory_or_off_means_no_cache(tmp_path, monkeypatch):
    path = _zones(tmp_path / "zones.geojson")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("PRIVMOB_CACHE_DIR", str(blocker / "cache"))  # cannot be created
    first = tessellation_input.load_tessellation(path)
    monkeypatch.setenv("PRIVMOB_CACHE_DIR", "off")
    assert cache_dir() is None
    _same(tessellation_input.load_tessellation(path), first)


def test_a_directory_others_may_write_to_is_not_used(tmp_path, cache, monkeypatch):
    """A cache folder writable by other users (a shared PRIVMOB_CACHE_DIR) is neither read
    nor written: an entry planted there (here: other tiles under the right key) is ignored."""
    path = _zones(tmp_path / "zones.geojson")
    first = tessellation_input.load_tessellation(path)
    (entry,) = _entries()
    with monkeypatch.context() as m:  # the planter's tiles, read without the cache
        m.setenv("PRIVMOB_CACHE_DIR", "off")
        planted = tessellation_input.load_tessellation(_zones(tmp_path / "p.geojson", 0.005))
    entry.write_bytes(entry_bytes(planted))  # under this file's key
    assert not all(shapely.equals_exact(planted.gdf.geometry.values, first.gdf.geometry.values, 0))
    cache.chmod(0o777)
    _same(tessellation_input.load_tessellation(path), first)  # read anew, not the planted tiles
    entry.unlink()
    tessellation_input.load_tessellation(path)
    assert _entries() == []  # nor written
    cache.chmod(0o700)
    tessellation_input.load_tessellation(path)
    assert len(_entries()) == 1


def test_a_shapefile_is_not_cached(tmp_path, cache):
    path = tmp_path / "grid.shp"
    box_grid(2).gdf.to_file(path)
    tessellation_input.load_tessellation(path)
    assert _entries() == []


def test_the_reports_outlines_come_from_the_cache_equal_and_a_broken_one_is_replaced(
    tmp_path, cache, monkeypatch
):
    """The report's simplified outlines are computed once per tessellation (fingerprint) and
    read back equal; a broken value is computed again and replaced; another tessellation or
    another simplification never reads them."""
    from privmob.releases.report import inputs

    tess = tessellation_input.load_tessellation(_zones(tmp_path / "zones.geojson"))
    first = inputs.Tiles.from_tessellation(tess)
    (value,) = cache.glob("*.json")

    def no_simplifying(*args, **kwargs):
        raise AssertionError("the outlines were simplified again")

    with monkeypatch.context() as m:
        m.setattr(inputs, "local_metric_crs", no_simplifying)
        assert inputs.Tiles.from_tessellation(tess).outlines == first.outlines
    value.write_text("[[[")  # truncated
    assert inputs.Tiles.from_tessellation(tess).outlines == first.outlines
    assert json.loads(value.read_text()) == first.outlines  # rewritten whole
    inputs.Tiles.from_tessellation(tess, simplify_m=5.0)
    moved = tessellation_input.load_tessellation(_zones(tmp_path / "moved.geojson", 0.004))
    assert inputs.Tiles.from_tessellation(moved).outlines != first.outlines
    assert len(list(cache.glob("*.json"))) == 3


def test_cached_polygons_are_built_on_first_use(tmp_path, cache):
    """A cached tessellation that is not a grid answers its number of tiles and bounds from
    the entry (all a release's plan needs, before NumPy and shapely are imported: issue 43);
    its tiles are built on first use, equal to the parsed ones, and before it is pickled."""
    import pickle

    path = _zones(tmp_path / "zones.geojson")
    first = tessellation_input.load_tessellation(path)
    again = tessellation_input.load_tessellation(path)
    assert not first.is_deferred and again.is_deferred
    assert again.k == first.k == 3 and again.bounds == first.bounds
    assert again.is_deferred  # k and bounds did not build the tiles
    copy = pickle.loads(pickle.dumps(again))
    assert not again.is_deferred and not copy.is_deferred
    for tess in (again, copy):
        _same(tess, first)
        assert tess.grid is None and tess.tile_names == first.tile_names
    lazily = tessellation_input.load_tessellation(path)
    assert lazily.is_deferred and lazily.fingerprint == first.fingerprint  # built by a read
    assert not lazily.is_deferred
    with pytest.raises(AttributeError):
        _ = tessellation_input.load_tessellation(path).no_such_attribute


def test_a_cached_grid_is_not_deferred(tmp_path, cache):
    path = tmp_path / "grid.geojson"
    box_grid(3).gdf.to_file(path, driver="GeoJSON")
    tessellation_input.load_tessellation(path)
    again = tessellation_input.load_tessellation(path)
    assert not again.is_deferred and again.grid is not None


def test_a_deferred_entry_whose_polygons_do_not_load_is_read_again(tmp_path, cache):
    """An entry whose head is whole but whose WKB is damaged (same lengths, other bytes: a
    disk fault or an edit) passes the cheap check made before the plan; when its tiles are
    first used they are read again from the file, checked, and the entry replaced, rather
    than a GEOS error after the plan line."""
    path = _zones(tmp_path / "zones.geojson")
    first = tessellation_input.load_tessellation(path)
    (entry,) = _entries()
    content = entry.read_bytes()
    head_end = content.index(b"\n", content.index(b"\n") + 1) + 1
    entry.write_bytes(content[:head_end] + b"\xff" * (len(content) - head_end))
    damaged = tessellation_input.load_tessellation(path)
    assert damaged.is_deferred and damaged.k == first.k  # the head alone was read
    _same(damaged, first)  # built by reading the file again
    assert entry.read_bytes() == content  # and the entry written anew
