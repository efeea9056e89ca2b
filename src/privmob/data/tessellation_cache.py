"""A per-user cache of validated tessellations, keyed by the file's bytes.

Reading and checking a detailed tessellation costs more than the rest of a small release's
start-up: the 263 NYC taxi zones (4 MB of GeoJSON) take 0.3-0.4 s to parse, reproject and check
for overlaps, the same file every night in a cron job. After the first load the validated tiles
are kept (:func:`entry_bytes`: their ids, names and bounds as JSON, their polygons as WKB) and
read back in a few milliseconds, with neither GeoPandas nor PyArrow (whose imports alone would
cost more than the parsing they save); the polygons of an entry that is not a grid are built
from the WKB on first use, after the release's plan line, with NumPy and shapely.

* **Key**: SHA-256 of the file's bytes, with privmob's version, the loading options (id and
  name columns, ``repair``) and the entry format: an edited file, another privmob or other
  options never hit an older entry. Only single-file formats are cached (a Shapefile's
  sidecar files are not hashed).
* **Where**: ``$PRIVMOB_CACHE_DIR``, else ``$XDG_CACHE_HOME/privmob/tessellations``
  (``~/.cache/privmob/tessellations``), a directory of mode 0700; ``PRIVMOB_CACHE_DIR=off``
  turns the cache off. A tessellation is public geometry: nothing personal is ever cached.
  A directory that another user owns, or that others may write to (``PRIVMOB_CACHE_DIR`` set
  to a shared folder), is not used: an entry planted there would replace the tiles of a file
  its planter never had to change.
* **Failures** never fail a release: an unwritable or full directory, or an unreadable entry,
  means the file is read and checked as without a cache (and an unreadable entry is replaced).
  Entries are written to a temporary file and renamed, so concurrent runs see whole entries.
* **Derived geometry** (:func:`read_derived`, :func:`write_derived`): public values computed
  from the tiles alone (the report's simplified outlines: 0.07-0.1 s for the taxi zones), kept
  as JSON beside the entries under the same rules, keyed by the caller (the tessellation's
  fingerprint, privmob's version and the parameters).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from privmob.data.tessellation import Tessellation

#: Formats cached: one file holds the whole tessellation.
CACHED_SUFFIXES = (".geojson", ".json", ".parquet", ".geoparquet", ".gpkg", ".zip")


def cache_dir() -> Path | None:
    """The cache directory (not created), or None when the cache is off."""
    env = os.environ.get("PRIVMOB_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "privmob" / "tessellations"


def _own(folder: Path) -> bool:
    """True when ``folder`` is this user's and no one else may write to it (POSIX)."""
    if not hasattr(os, "getuid"):
        return True
    st = folder.stat()
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def entry_key(path: Path, options: tuple[Any, ...]) -> str | None:
    """The entry's name for ``path`` read with ``options``; None if it is not cached."""
    if path.suffix.lower() not in CACHED_SUFFIXES or not path.is_file():
        return None
    from privmob import __version__

    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    digest.update(repr((__version__, options)).encode())
    digest.update(_MAGIC)  # another entry format (another privmob of the same version) never hits
    return digest.hexdigest()


#: the suffix of an entry's file, and the first line of its content
ENTRY_SUFFIX = ".tiles"
_MAGIC = b"privmob tiles 3\n"


def entry_bytes(tess: Tessellation) -> bytes:
    """An entry's content: a first line naming the format, a line of JSON (the tile ids, the
    names, the other public columns, the length of each polygon's WKB, the tiles' bounds and
    whether they are the cells of a grid) and the polygons' WKB, in index order."""
    import shapely

    wkb = shapely.to_wkb(tess.geometries).tolist()
    head = {
        "ids": tess.tile_ids,
        "names": tess.tile_names,
        "attributes": tess.attributes,
        "wkb": [len(w) for w in wkb],
        "bounds": list(tess.bounds),
        "grid": tess.grid is not None,
    }
    return _MAGIC + json.dumps(head).encode() + b"\n" + b"".join(wkb)


def _parts(content: bytes) -> tuple[dict[str, Any], bytes]:
    """The head and the WKB of an entry's content; ValueError when it is not one."""
    if not content.startswith(_MAGIC):
        raise ValueError("not a tessellation entry")
    line, _, body = content[len(_MAGIC) :].partition(b"\n")
    head = json.loads(line)
    if len(head["wkb"]) != len(head["ids"]) or sum(head["wkb"]) != len(body):
        raise ValueError("a truncated tessellation entry")
    return head, body


def _tiles(head: dict[str, Any], body: bytes) -> Tessellation:
    import numpy as np
    import shapely

    from privmob.data.tessellation import Tessellation

    ends = np.cumsum(head["wkb"]).tolist()
    wkb = [body[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]
    return Tessellation.from_tiles(
        head["ids"], shapely.from_wkb(wkb), head["names"], attributes=head["attributes"]
    )


def tiles_of(content: bytes, read_again: Callable[[], Tessellation] | None = None) -> Tessellation:
    """The tessellation of an entry's content (:func:`entry_bytes`); ValueError when it is
    not one. The tiles of a grid are built at once (the caller gives them the grid's
    arithmetic); any other's on first use (:meth:`Tessellation.deferred`: their number and
    bounds are the entry's), so that reading an entry needs neither NumPy nor shapely. A
    deferred entry whose polygons then do not load is read again from its file by
    ``read_again`` (as an entry that fails at once is: :func:`_read`)."""
    from privmob.data.tessellation import Tessellation

    head, body = _parts(content)
    if head["grid"]:
        return _tiles(head, body)
    x0, y0, x1, y1 = (float(b) for b in head["bounds"])

    def build() -> Tessellation:
        try:
            return _tiles(head, body)
        except Exception:
            if read_again is None:
                raise
            return read_again()

    return Tessellation.deferred(len(head["ids"]), (x0, y0, x1, y1), build)


def read_entry(
    key: str, read_again: Callable[[], Tessellation] | None = None
) -> Tessellation | None:
    """The validated tiles of entry ``key``, or None; ``read_again``: the tiles read from the
    file itself, should a deferred entry's polygons not load when they are first used."""
    return _read(key + ENTRY_SUFFIX, lambda path: tiles_of(path.read_bytes(), read_again))


def write_entry(key: str, tess: Tessellation) -> None:
    """Keep the validated tiles under ``key``; silently nothing when that is not possible."""
    _write(key + ENTRY_SUFFIX, lambda partial: Path(partial).write_bytes(entry_bytes(tess)))


def derived_key(*parts: Any) -> str:
    """The key of a derived value: SHA-256 of privmob's version and ``parts`` (the
    tessellation's fingerprint and whatever else the value depends on)."""
    from privmob import __version__

    return hashlib.sha256(repr((__version__, *parts)).encode()).hexdigest()


def read_derived(key: str) -> Any | None:
    """The JSON value kept under ``key`` (:func:`derived_key`), or None."""
    return _read(f"{key}.json", lambda path: json.loads(path.read_text()))


def _read(name: str, load: Callable[[Path], Any]) -> Any | None:
    """``load(path)`` of the cache's file ``name``, or None: no cache, no such file, a folder
    that is not this user's alone, or a file that does not load (a truncated or foreign file:
    the value is computed again, then replaced)."""
    folder = cache_dir()
    if folder is None:
        return None
    path = folder / name
    if not path.is_file() or not _own(folder):
        return None
    try:
        return load(path)
    except Exception:
        return None


def write_derived(key: str, value: Any) -> None:
    """Keep the JSON value ``value`` under ``key``; silently nothing when that is not
    possible."""

    def dump(partial: str) -> None:
        Path(partial).write_text(json.dumps(value, separators=(",", ":")))

    _write(f"{key}.json", dump)


def _write(name: str, write: Callable[[str], Any]) -> None:
    """``write(path)`` to a temporary file of the cache folder, renamed to ``name``."""
    folder = cache_dir()
    if folder is None:
        return
    with contextlib.suppress(Exception):  # a cache that cannot be written is no cache
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _own(folder):
            return
        fd, partial = tempfile.mkstemp(prefix=".partial-", suffix=Path(name).suffix, dir=folder)
        os.close(fd)
        try:
            write(partial)
            os.replace(partial, folder / name)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(partial)
