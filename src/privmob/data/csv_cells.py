"""CSV files privmob writes, safe to open in a spreadsheet.

A text cell that starts with ``=``, ``+``, ``-`` or ``@`` (or a tab or carriage return) is read
by Excel, LibreOffice and Google Sheets as a formula: a tile named ``=HYPERLINK(...)`` in a
public tessellation would become a link, ``+cmd|...`` a command (CSV or formula injection,
OWASP). Every CSV privmob writes goes through :func:`write_csv`, which prefixes such text
cells, and such column names, with a single quote (the spreadsheets' own "this is text" mark).
Numbers are left as numbers: a negative noisy count stays ``-3``.
``tests/data/test_csv_cells.py`` checks every ``to_csv`` of the package goes through here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: the first characters that make a spreadsheet read a cell as a formula
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def escape_cell(value: Any) -> Any:
    """``value`` with a leading ``'`` when it is text that a spreadsheet would run."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def formula_safe(table: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``table`` whose text cells and column names cannot run as formulas."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    out = table.copy()
    for column in out.columns:
        if not (is_numeric_dtype(out[column]) or is_bool_dtype(out[column])):
            out[column] = out[column].map(escape_cell)
    out.columns = [escape_cell(str(c)) for c in out.columns]
    return out


def write_csv(table: pd.DataFrame, path: str | Path, **options: Any) -> None:
    """Write ``table`` as CSV without its index (``options``: more of pandas' ``to_csv``),
    every text cell made formula-safe (:func:`formula_safe`). A file with a carriage return
    inside a text cell quotes every text cell: pandas leaves such a cell unquoted, and a
    reader would split its row there."""
    import csv

    safe = formula_safe(table)
    has_cr = any(
        safe.iloc[:, i].map(lambda v: isinstance(v, str) and "\r" in v).any()
        for i in range(safe.shape[1])
    )
    quoting = csv.QUOTE_NONNUMERIC if has_cr else csv.QUOTE_MINIMAL
    safe.to_csv(path, **{"index": False, "quoting": quoting, **options})
