"""Aggregated series files (CSV/Parquet, one row per timestamp and zone), read against their
declared public domain: the time grid and the zones are given by the caller, never taken from
the rows (SPEC 1). Messages name row numbers, never a data date."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privmob.domain import time_grid
from privmob.errors import ConfigError, InputError
from privmob.lazy_imports import lazy_module
from privmob.surface import spelled

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

#: printed (by the caller's ``warn``) when a series' time domain is its own rows
DOMAIN_FROM_ROWS_WARNING = (
    "--domain-from-data: the time domain is the file's rows (its dates are not protected); "
    "the release is stamped NOT FOR PUBLICATION"
)


def split_list(spec: str) -> list[str]:
    """A comma-separated list, or a file with one item per line (or its first CSV column)."""
    path = Path(spec)
    if spec and path.is_file():
        items = []
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                items.append(line.split(",")[0].strip())
        return items
    return [t.strip() for t in spec.replace(";", ",").split(",") if t.strip()]


@dataclass(frozen=True)
class SeriesInput:
    """A pre-aggregated series read against its declared domain, bound to its content like
    every loaded input: ``fingerprint`` (:func:`series_fingerprint`) and ``rows`` go to the
    ledger, never into a release. It holds no user ids, so no people sketch (``people`` is
    None). Unpacks as ``values, labels, zones``."""

    values: np.ndarray
    labels: list[object]
    zones: list[object] | None
    fingerprint: str
    rows: int
    people: Any = None

    @classmethod
    def of(
        cls, values: np.ndarray, labels: list[object], zones: list[object] | None
    ) -> SeriesInput:
        """The series ``values`` over ``labels`` (and ``zones``), bound to that content."""
        fingerprint, rows = series_fingerprint(values, labels, zones)
        return cls(values, labels, zones, fingerprint, rows)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.values, self.labels, self.zones))

    def people_sketch(self, key: bytes) -> None:
        """None: the values of a series name no user."""
        return None

    def older_fingerprints(self) -> tuple[str, ...]:
        """The series' v2 fingerprint (:func:`series_fingerprint`)."""
        return (series_fingerprint(self.values, self.labels, self.zones, legacy=True)[0],)


def series_fingerprint(
    values: np.ndarray, labels: list[object], zones: list[object] | None, *, legacy: bool = False
) -> tuple[str, int]:
    """(fingerprint, rows) of a series' content, on canonical values as the engines' inputs
    (:mod:`privmob.data.fingerprint`, the same version and tag): each (zone, time, value)
    row's text (zone as text, a time in ISO 8601, a value as the shortest text of its double)
    hashed by :func:`~privmob.data.fingerprint.row_hash`; the same for a CSV and a Parquet
    copy, in any row order, whatever the column names. A series row has no canonical integer,
    so every row is in the sample (:func:`~privmob.data.fingerprint.reference_total`): a series
    is small and read by pandas, its fingerprint costs no pass in an engine. ``legacy``: the
    v2 fingerprint (untagged; for ledgers that hold one)."""
    from privmob.data import fingerprint as fp

    def text(label: object) -> str:  # a time as ISO 8601 whether the file held text or times
        if isinstance(label, str):
            try:
                return pd.Timestamp(label).isoformat()
            except (ValueError, TypeError):
                return label
        return label.isoformat() if isinstance(label, pd.Timestamp) else str(label)

    times = [text(t) for t in labels]
    grid = np.atleast_2d(np.asarray(values, dtype=float))
    names = [""] if zones is None else [str(z) for z in zones]
    rows: list[tuple[list[str], list[int | None]]] = [
        ([zone, t, repr(float(v))], [])
        for zone, row in zip(names, grid, strict=True)
        for t, v in zip(times, row, strict=True)
    ]
    if legacy:  # v2: the sum of every row's hash, untagged
        total = str(sum(fp.row_hash(t) for t, _ in rows))
        version, tag = fp.LEGACY_VERSION, ""
    else:
        total, version, tag = fp.reference_total(rows), fp.FINGERPRINT_VERSION, fp.FINGERPRINT_TAG
    key = f"{version}|series:zone,time,value|{grid.size}|{total}"
    return tag + hashlib.sha256(key.encode()).hexdigest(), grid.size


def load_series(
    path: Path,
    value_column: str,
    time_column: str,
    zone_column: str | None,
    zones: list[str] | None = None,
    grid: pd.DatetimeIndex | None = None,
) -> SeriesInput:
    """Read a series file (CSV/Parquet), one row per timestamp (and zone), bound to its
    content (:class:`SeriesInput`).

    The rows list the complete, public time domain: every timestamp (and zone) must be present,
    zeros included. With ``zone_column`` the zone domain is ``zones``, declared by the caller
    (public, SPEC 1): it is never taken from the zones that happen to have rows, which would
    reveal which zones are empty. Holds values (T,) or (zones, T), time labels, zone labels
    (in the declared order).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", source=str(path))
    try:
        df = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except Exception as exc:  # pandas raises many kinds
        raise InputError(f"cannot read the series: {exc}", source=str(path)) from exc
    for col in (value_column, time_column, zone_column):
        if col is not None and col not in df.columns:
            raise InputError(
                "no such column",
                source=str(path),
                column=col,
                hint=f"columns are: {', '.join(map(str, df.columns))}",
            )
    values = pd.to_numeric(df[value_column], errors="coerce")
    bad = values.isna() | ~np.isfinite(values.astype(float))
    _refuse_rows(bad, "values must be finite numbers", path, value_column)
    df = df.assign(**{value_column: values})
    if df[time_column].dtype == object:
        with contextlib.suppress(ValueError, TypeError):  # labels that are not dates stay text
            df[time_column] = pd.to_datetime(df[time_column], format="mixed")
    if grid is not None:  # in file order, so that the message names the row, not the date
        try:
            stamps = pd.DatetimeIndex(pd.to_datetime(df[time_column], format="mixed"))
        except (ValueError, TypeError) as exc:
            raise InputError(
                "the time column does not hold timestamps", source=str(path), column=time_column
            ) from exc
        _refuse_rows(
            pd.Series(~stamps.isin(grid)),
            "a timestamp that is not on the declared grid",
            path,
            time_column,
            hint="the file must hold exactly the grid's steps; the domain is public",
        )
    keys = [time_column] + ([zone_column] if zone_column else [])
    _refuse_rows(
        df.duplicated(keys, keep=False),
        "more than one row per timestamp" + (" and zone" if zone_column else ""),
        path,
        time_column,
        hint="aggregate first: the file must hold one value per timestamp (and zone)",
    )
    df = df.sort_values(time_column, kind="stable")
    if zone_column is None:
        return SeriesInput.of(df[value_column].to_numpy(), df[time_column].tolist(), None)
    if not zones:
        raise ConfigError(
            f"a series per zone needs the public list of zones ({spelled('--zones', 'zones=')})",
            hint=spelled(
                "pass --zones a,b,c or a file with one zone per line", 'pass zones=["a", "b", "c"]'
            )
            + ": the zones are never taken from the data",
        )
    if len(set(zones)) != len(zones):
        raise ConfigError("--zones lists a zone twice")
    df = df.assign(**{zone_column: df[zone_column].astype(str)})
    unknown = ~df[zone_column].isin(zones)
    _refuse_rows(unknown, "a zone that is not in the declared --zones", path, zone_column)
    wide = df.pivot(index=zone_column, columns=time_column, values=value_column).reindex(zones)
    if wide.isna().any().any():
        raise InputError(
            "some (zone, timestamp) pairs have no row; the file must list the full domain",
            source=str(path),
            hint="add rows with value 0 for the missing pairs",
        )
    return SeriesInput.of(wide.to_numpy(), list(wide.columns), list(wide.index))


def _refuse_rows(
    mask: pd.Series, problem: str, path: Path, column: str, *, hint: str | None = None
) -> None:
    """Refuse the series file (:class:`InputError`) at the first row where ``mask`` holds."""
    if mask.any():
        raise InputError(problem, source=str(path), column=column, row=_first_row(mask), hint=hint)


def _first_row(mask: pd.Series) -> int:
    """1-based row number (header not counted) of the first True of a row mask (messages
    name rows, never show them: a series row holds a data date)."""
    return int(np.flatnonzero(np.asarray(mask))[0]) + 1


def time_grid_of(start: str | None, end: str | None, freq: str | None) -> pd.DatetimeIndex:
    """The declared grid of ``start``, ``end`` and ``freq`` (all given)."""
    return time_grid(str(start), str(end), str(freq))


def check_time_domain(
    labels: list[object],
    start: str | None,
    end: str | None,
    freq: str | None,
    path: Path,
    *,
    warn: Callable[[str], None] | None = None,
) -> None:
    """With --start/--end/--freq, the file's timestamps must be exactly that public grid (a
    timestamp without a row would otherwise vanish from the release and reveal an empty step);
    without them (only under --domain-from-data) the file's rows are taken as the domain and
    the release is stamped not for publication (``warn`` receives
    :data:`DOMAIN_FROM_ROWS_WARNING`). Messages print no data date."""
    given = [x is not None for x in (start, end, freq)]
    if not any(given):
        if warn is not None:
            warn(DOMAIN_FROM_ROWS_WARNING)
        return
    if not all(given):
        raise ConfigError("give --start, --end and --freq together")
    grid = time_grid(str(start), str(end), str(freq))
    try:
        stamps = pd.DatetimeIndex(pd.to_datetime(pd.Series(labels), format="mixed"))
    except (ValueError, TypeError) as exc:
        raise InputError("the time column does not hold timestamps", source=str(path)) from exc
    outside = ~stamps.isin(grid)
    if outside.any():  # a row number, never the data date
        raise InputError(
            f"a timestamp that is not on the declared grid [{start}, {end}) every {freq}",
            source=str(path),
            row=_first_row(pd.Series(outside)),
            hint="the file must hold exactly the grid's steps; the domain is public",
        )
    if len(grid.difference(stamps)):
        raise InputError(
            f"some steps of the declared grid [{start}, {end}) every {freq} have no row",
            source=str(path),
            hint="add rows with value 0 for missing steps; the domain is public",
        )
