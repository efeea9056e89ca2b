"""Errors a user can act on.

Every error privmob raises on purpose derives from :class:`PrivmobError`. The CLI renders
one as a single message plus a hint, without a traceback, and exits with the error's code:

* 2: bad input or configuration (:class:`InputError`, :class:`ConfigError`,
  :class:`EngineError`);
* 3: the ledger refused the release (:class:`BudgetError`);
* 4: the output cannot be written (:class:`OutputError`);
* 1: an internal error (anything else): a short report goes to a private file.

Messages never print a record: an input error names the file, the column, the row number and
the kind of problem, and shows a value only for a column that is not personal (never a user id,
a time or a location). Exact counts of bad records go to :attr:`PrivmobError.detail`, which the
CLI prints only with ``--verbose``.
"""

from __future__ import annotations

from typing import Any

#: exit codes of the ``privmob`` command
EXIT_INTERNAL = 1
EXIT_INPUT = 2
EXIT_BUDGET = 3
EXIT_OUTPUT = 4


class PrivmobError(Exception):
    """Base class: a message for the user and a hint on what to do.

    ``detail``: data-dependent specifics (exact counts of records, a data timestamp) that are
    kept out of the message and shown only when the user asks for them (``--verbose``).
    """

    exit_code = EXIT_INPUT

    def __init__(self, message: str, *, hint: str | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.detail = detail

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class InputError(PrivmobError):
    """Bad input data: names the file, the column, the row and the kind of problem.

    ``example`` is shown as it is: pass only public values (a tessellation's feature, a tile
    id of a public table, a column name), never a person's record. ``row`` is the 1-based
    number of the first bad record (header rows not counted).
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        column: str | None = None,
        row: int | None = None,
        example: Any = None,
        hint: str | None = None,
        detail: str | None = None,
    ) -> None:
        parts = []
        if source:
            parts.append(f"{source}")
        if column:
            parts.append(f"column '{column}'")
        if row is not None:
            parts.append(f"row {row}")
        where = ", ".join(parts)
        text = f"{where}: {message}" if where else message
        if example is not None:
            text += f"\n  example: {example}"
        super().__init__(text, hint=hint, detail=detail)
        self.source = source
        self.column = column
        self.row = row
        self.example = example


class ConfigError(PrivmobError):
    """Invalid parameters (epsilon, bounds, periods, options)."""


class BudgetError(PrivmobError):
    """The ledger refuses a release that would exceed the dataset's privacy budget."""

    exit_code = EXIT_BUDGET


class OutputError(PrivmobError):
    """The output cannot be written (it exists, or its place is not writable)."""

    exit_code = EXIT_OUTPUT


class EngineError(PrivmobError):
    """The engine (DuckDB or Spark) is missing or failed in a way the user can fix."""


class PrivmobWarning(UserWarning):
    """A warning from public parameters before a release is charged (e.g. a very small
    epsilon); the CLI prints it as one ``warning:`` line."""
