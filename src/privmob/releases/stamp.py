"""Every data file carries its own publication stamp.

A release made with seeded (test) noise, or on a domain read from the data, must never be
published; a console line and ``metadata.json`` are easily lost once the files are copied, so
each Parquet file itself carries the stamp in its key-value metadata:

* ``privmob.for_publication``: ``"true"`` or ``"false"``;
* ``privmob.warning``: why not (only when ``"false"``);
* ``privmob.kind`` and ``privmob.version``.

JSON layers (GeoJSON layers, the density GeoJSON) carry the same in a top-level ``privmob``
member (:func:`json_stamp`); CSV layers in ``privmob_*`` columns on every row
(``render/layers.py``).

Readers check it with :func:`read_stamp` (or ``pyarrow.parquet.read_schema(path).metadata``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from privmob.json_types import JSONObject
from privmob.lazy_imports import lazy_module, pd

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privmob.releases.release import Release
else:
    pa = lazy_module("pyarrow")
    pq = lazy_module("pyarrow.parquet")

FOR_PUBLICATION_KEY = "privmob.for_publication"
WARNING_KEY = "privmob.warning"


def stamp(release: Release) -> dict[str, str]:
    """The key-value stamp of ``release`` (a :class:`privmob.releases.release.Release`)."""
    meta = {
        FOR_PUBLICATION_KEY: "true" if release.for_publication else "false",
        "privmob.kind": str(release.kind),
        "privmob.version": str(release.software_version),
    }
    if not release.for_publication:
        meta[WARNING_KEY] = str(release.typed_metadata().provenance.warning or "")
    return meta


def json_stamp(release: Release) -> JSONObject:
    """The stamp for a JSON document (e.g. a GeoJSON layer's ``privmob`` member)."""
    out: JSONObject = {
        "kind": str(release.kind),
        "version": str(release.software_version),
        "for_publication": release.for_publication,
    }
    if not release.for_publication:
        out["warning"] = str(release.typed_metadata().provenance.warning or "")
    return out


def write_stamped_parquet(df: pd.DataFrame, path: str | Path, release: Release) -> None:
    """Write ``df`` to ``path`` as Parquet with the release's stamp (and, for a release not
    for publication, its warning) in the file's key-value metadata."""
    table = pa.Table.from_pandas(df, preserve_index=False)
    extra = {k.encode(): v.encode() for k, v in stamp(release).items()}
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **extra})
    pq.write_table(table, str(path))


def restamp_parquet(path: str | Path, release: Release) -> None:
    """Add the release's stamp to the key-value metadata of a Parquet file written by another
    writer (a GeoParquet layer), keeping the metadata it has (``geo``)."""
    table = pq.read_table(str(path))
    extra = {k.encode(): v.encode() for k, v in stamp(release).items()}
    pq.write_table(table.replace_schema_metadata({**(table.schema.metadata or {}), **extra}), path)


def read_stamp(path: str | Path) -> dict[str, str]:
    """The ``privmob.*`` stamp of a Parquet file ({} for a file privmob did not write)."""
    meta = pq.read_schema(str(path)).metadata or {}
    return {k.decode(): v.decode() for k, v in meta.items() if k.decode().startswith("privmob.")}


def test_mode_mark(seed: int | None) -> Callable[[Release], None]:
    """What a release made with a fixed ``seed`` gets before it is charged and written
    (:attr:`privmob.releases.base.Accountant.annotate`): the seed recorded in its metadata and
    the release marked not for publication, so every file it writes is stamped."""

    def mark(release: Release) -> None:
        release.for_publication = False
        release.extra["test_mode"] = {"seed": seed, "ledger": "throw-away (deleted after the run)"}

    return mark
