"""The engine interface: where all work that touches raw records happens.

An engine registers input tables, runs SQL, and returns small dense integer arrays over public
domains to the driver. The driver (mechanisms, accountant, renderers) never sees raw records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from privmob.engine.dialect import Dialect
from privmob.errors import EngineError
from privmob.lazy_imports import lazy_module
from privmob.surface import option

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")


@dataclass(frozen=True)
class CsvFormat:
    """How the CSV file(s) of :meth:`Engine.read_csv` are laid out.

    ``delimiter``: detected from the file when None; ``header``: whether the first row names
    the columns; ``names``: the columns' names where it does not (``column0, ...`` when None);
    ``filename_column``: a column of that name holds each row's file path (per-user files
    whose name is the user id).
    """

    delimiter: str | None = None
    header: bool = True
    names: tuple[str, ...] | None = None
    filename_column: str | None = None


class Engine(Protocol):
    """What every engine offers (DuckDB by default; Spark for data beyond one machine)."""

    name: str
    dialect: Dialect

    def register(self, name: str, data: object) -> None:
        """Expose an Arrow table, pandas/Polars DataFrame or Parquet path as a view."""

    def read_parquet(self, name: str, path: str) -> None:
        """Expose a Parquet file or folder (any path or URL the engine reads) as a view."""

    def read_csv(self, name: str, path: str | list[str], fmt: CsvFormat = CsvFormat()) -> None:
        """Expose a CSV file (gzip ok), or several with the same columns, as a view whose
        columns are all text, read as ``fmt`` says.

        Parsing (times, numbers) is left to the shared loader SQL, so every engine applies
        the same rules.
        """

    def create_view(self, name: str, sql: str) -> None: ...

    def materialize(self, name: str, sql: str) -> None:
        """Store the result of ``sql`` as a table (for relations queried many times)."""

    def append(self, name: str, sql: str) -> None:
        """Add the rows of ``sql`` (the same columns) to the table ``name`` of
        :meth:`materialize`."""

    def fetch(self, sql: str) -> pd.DataFrame:
        """Run a query whose result is small (aggregates, examples) and return it."""

    def columns(self, name: str) -> list[str]: ...

    def close(self) -> None: ...


def scatter_counts(
    index_cols: Sequence[npt.ArrayLike], counts: npt.ArrayLike, shape: tuple[int, ...]
) -> npt.NDArray[np.int64]:
    """Dense int64 array of ``shape`` with ``counts`` at ``index_cols`` (zeros elsewhere).

    Indices outside the shape are an internal error: the SQL must map everything outside the
    public domain to the outliers cell first.
    """
    dense = np.zeros(shape, dtype=np.int64)
    if np.size(counts) == 0:
        return dense
    idx = tuple(np.asarray(c, dtype=np.int64) for c in index_cols)
    for axis, (c, n) in enumerate(zip(idx, shape, strict=True)):
        if c.size and (c.min() < 0 or c.max() >= n):
            raise AssertionError(
                f"engine returned an index outside the public domain on axis "
                f"{axis}: [{c.min()}, {c.max()}] not in [0, {n})"
            )
    np.add.at(dense, idx, np.asarray(counts, dtype=np.int64))
    return dense


def dense_counts(
    engine: Engine, sql: str, shape: tuple[int, ...], values: tuple[str, ...] = ("n",)
) -> npt.NDArray[np.int64]:
    """Run ``sql`` returning columns ``i0, i1, ..., n`` and scatter into a dense array; with
    more ``values`` columns (integers), one dense array each, stacked first.

    An engine failure (input changed or unreadable since validation, out of memory or disk)
    becomes an :class:`~privmob.errors.EngineError`: one message, no traceback, and since
    counting precedes the ledger charge, nothing is charged.
    """
    try:
        df = engine.fetch(sql)
    except Exception as exc:
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        raise EngineError(
            f"the {getattr(engine, 'name', 'query')} engine failed while counting: {first}",
            hint="check that the input files are unchanged and readable; for memory errors "
            f"pass {option('memory_limit')} or use a machine with more memory",
        ) from exc
    index_cols = [df[f"i{a}"].to_numpy() for a in range(len(shape))]
    if values == ("n",):
        return scatter_counts(index_cols, df["n"].to_numpy(), shape)
    return np.stack([scatter_counts(index_cols, df[v].to_numpy(), shape) for v in values])
