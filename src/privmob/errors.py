"""Errors a user can act on.

Every error privmob raises on purpose derives from :class:`PrivmobError`. The CLI renders
one as a single message plus a hint and exits with code 2, without a traceback.
"""

from __future__ import annotations

from typing import Any


class PrivmobError(Exception):
    """Base class: a message for the user and a hint on what to do."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class InputError(PrivmobError):
    """Bad input data: names the file, the column and an example row."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        column: str | None = None,
        example: Any = None,
        hint: str | None = None,
    ) -> None:
        parts = []
        if source:
            parts.append(f"{source}")
        if column:
            parts.append(f"column '{column}'")
        where = ", ".join(parts)
        text = f"{where}: {message}" if where else message
        if example is not None:
            text += f"\n  example row: {example}"
        super().__init__(text, hint=hint)
        self.source = source
        self.column = column
        self.example = example


class ConfigError(PrivmobError):
    """Invalid parameters (epsilon, bounds, periods, options)."""


class BudgetError(PrivmobError):
    """The ledger refuses a release that would exceed the dataset's privacy budget."""


class EngineError(PrivmobError):
    """The engine (DuckDB or Spark) is missing or failed in a way the user can fix."""
