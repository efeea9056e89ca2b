"""A release's files: one stamped Parquet file per table and ``metadata.json``, written into a
folder (the staging folder of :mod:`privmob.releases.publish`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from privmob.releases.stamp import write_stamped_parquet

if TYPE_CHECKING:
    from privmob.releases.release import Release


def write_tables(release: Release, out: Path) -> list[Path]:
    """One Parquet file per table of ``release`` in the folder ``out``."""
    written = []
    for name, df in release.tables.items():
        path = out / f"{name}.parquet"
        write_stamped_parquet(df, path, release)  # the file itself says if it may be published
        written.append(path)
    return written


def write_metadata_file(release: Release, out: Path) -> list[Path]:
    """``metadata.json`` of ``release`` (its cost, parameters and ledger entries) in ``out``."""
    meta = out / "metadata.json"
    doc = release.typed_metadata().to_json()
    meta.write_text(json.dumps(doc, indent=2, default=json_default) + "\n")
    return [meta]


def json_default(obj: object) -> object:
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "value"):
        return obj.value
    return str(obj)
