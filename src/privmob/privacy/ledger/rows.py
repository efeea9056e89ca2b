"""Rows of a ledger's tables as its code reads them, on SQLite and PostgreSQL alike.

Both drivers return a row as a tuple of plain values; these types say so, and the small readers
below turn a query's result into what the ledger's code uses (a row that must exist, a number,
a text, a row by column name).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, TypeAlias

from privmob.errors import BudgetError

#: a value of a ledger's column as the database driver returns it (a PostgreSQL BOOLEAN: a bool)
SQLValue: TypeAlias = str | int | float | bytes | None
#: a row of a query, its columns in the query's order
Row: TypeAlias = tuple[SQLValue, ...]
#: a row by column name (:func:`row_dicts`)
Record: TypeAlias = dict[str, SQLValue]
#: the parameters of a statement, for its ``?`` placeholders in order
Parameters: TypeAlias = Sequence[SQLValue]


class Cursor(Protocol):
    """A DB-API cursor as the ledger reads it (sqlite3's, psycopg's)."""

    @property
    def description(self) -> Sequence[Sequence[object]] | None: ...

    def fetchone(self) -> Row | None: ...

    def fetchall(self) -> Sequence[Row]: ...

    def __iter__(self) -> Iterator[Row]: ...


class Con(Protocol):
    """A DB-API connection as the ledger uses it (``?`` placeholders)."""

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, parameters: Parameters = ..., /) -> Cursor: ...


def one(cur: Cursor) -> Row:
    """The row of a query that always returns one (an aggregate, a function's result)."""
    row = cur.fetchone()
    if row is None:
        raise BudgetError("the ledger returned no row where a query always returns one")
    return row


def as_int(value: SQLValue) -> int:
    """A number stored in a column (``int(value)``; NULL: TypeError, as ``int(None)``)."""
    if value is None:
        raise TypeError("a NULL column where a number is stored")
    return int(value)


def text(value: SQLValue) -> str | None:
    """A TEXT column's value (NULL: None)."""
    return None if value is None else str(value)


def column_names(cur: Cursor) -> list[str]:
    """The names of the columns of ``cur``'s query."""
    return [str(d[0]) for d in cur.description or ()]


def row_dicts(cur: Cursor) -> list[Record]:
    """The rows of ``cur``'s query by column name."""
    names = column_names(cur)
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
