"""JSON values as types: what privmob reads from and writes to JSON (metadata, ledger params)."""

from __future__ import annotations

from typing import TypeAlias

JSON: TypeAlias = "str | int | float | bool | None | list[JSON] | dict[str, JSON]"
#: a JSON object
JSONObject: TypeAlias = "dict[str, JSON]"
