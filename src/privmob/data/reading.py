"""Input sources: file names, paths and the datasets they name."""

from __future__ import annotations

from pathlib import Path


def dataset_name(explicit: str | None, source: str | Path) -> str:
    """The dataset name: explicit, or the input file's name without extensions."""
    if explicit:
        return explicit
    name = Path(str(source)).name
    for suffix in (".gz", ".parquet", ".csv", ".tsv", ".txt"):
        name = name.removesuffix(suffix)
    return name or "dataset"
