"""Option values read without pydantic when the text is plain (issue 43: the plan line first).

Typer (0.29) turns every option's text into its value through a pydantic ``TypeAdapter``
built for that option, even for an option left at its default of ``None``: importing pydantic
and building the adapters of a release command's 30-odd options cost about 0.2 CPU seconds
before the plan line, more than half of what the issue allows for the whole start-up.

:func:`read_plainly` gives each option of a command a :class:`PlainValues`: ``None`` stays
``None`` (as Typer's own coercion returns it before using the adapter); text for a ``str``
option (or a list of them), an ``int`` or ``float`` written plainly (``12``, ``-3``, ``0.25``,
``1e-3``), a ``Path`` and an ``Enum`` choice (through Typer's own path check and choice, the
functions its adapters call) are turned into the value Typer's adapter gives; a value that is
already of the option's exact type is kept. Anything else (literals, other lists, ranges,
custom parsers, ``1_000``, ``inf``, a value Typer refuses) goes to
Typer's adapter, built then as before, so that every message and value stays Typer's:
``tests/cli/test_plain_values.py`` compares both on the values each kind of option takes.

With a Typer that has no ``_runtime_param`` (older or newer) nothing is changed.
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

#: numbers written plainly: no underscores, no leading zeros, at most a 2-digit exponent (the
#: text a Python ``int``/``float`` and pydantic read alike); anything else goes to Typer
PLAIN_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
PLAIN_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]{1,2})?")

_NOT_PLAIN = object()


class PlainValues:
    """An option's coercion: plain values here, the rest by Typer's own runtime parameter
    (built on first need, as Typer builds it)."""

    def __init__(self, param: Any) -> None:
        self.param = param
        self.annotation = param.type_descriptor.annotation
        self.info = param.type_descriptor.parameter_info
        self._typer: Any = None

    def typer_param(self) -> Any:
        if self._typer is None:
            from typer._coercion import build_runtime_param

            self._typer = build_runtime_param(self.param.type_descriptor)
        return self._typer

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:  # what Typer's RuntimeParam.coerce returns before its adapter
            return () if param.multiple or param.nargs == -1 else None
        plain = self.plain(value, ctx)
        if plain is _NOT_PLAIN:
            return self.typer_param().coerce(value, param=param, ctx=ctx)
        return plain

    def plain(self, value: Any, ctx: Any = None) -> Any:
        """The value Typer's adapter gives for ``value``, or ``_NOT_PLAIN``."""
        ann, info = self.annotation, self.info
        if self.param.type_descriptor.file_annotation is not None:
            return _NOT_PLAIN
        if info.parser is not None:  # Typer's adapter calls the parser and nothing else: ours
            # are called here on text (-T N|auto), anyone else's by Typer
            if not (
                getattr(info.parser, "__module__", "").startswith("privmob.")
                and isinstance(value, str)
            ):
                return _NOT_PLAIN
            try:
                return info.parser(value)
            except Exception:  # a value refused: Typer's adapter says so, as ever
                return _NOT_PLAIN
        if ann is bool:
            return value if type(value) is bool else _NOT_PLAIN  # Typer passes a bool as is
        if ann in (int, float):
            if info.min is not None or info.max is not None or info.clamp:
                return _NOT_PLAIN
            if type(value) is ann:
                return value
            if isinstance(value, str):
                pattern = PLAIN_INT if ann is int else PLAIN_FLOAT
                if pattern.fullmatch(value):
                    return ann(value)
            return _NOT_PLAIN
        if ann is str:
            return value if type(value) is str else _NOT_PLAIN
        if get_origin(ann) is list and get_args(ann) == (str,):
            ok = isinstance(value, list | tuple) and all(type(v) is str for v in value)
            return list(value) if ok else _NOT_PLAIN
        if isinstance(ann, type) and issubclass(ann, Enum):
            return self._choice(value, tuple(ann), ctx)
        if isinstance(ann, type) and issubclass(ann, Path) and info.path_type is None:
            if isinstance(value, str) and value and "\0" not in value:
                value = ann(value)  # as pydantic reads a path from text
            if not isinstance(value, ann):
                return _NOT_PLAIN
            return self._path(value, ctx)
        return _NOT_PLAIN

    def _choice(self, value: Any, choices: tuple[Any, ...], ctx: Any) -> Any:
        from typer._param_types import coerce_cli_choice

        try:  # Typer's own choice; a value that is none of them goes to Typer's message
            return coerce_cli_choice(
                value, choices=choices, case_sensitive=self.info.case_sensitive, ctx=ctx
            )
        except ValueError:
            return _NOT_PLAIN

    def _path(self, value: Path, ctx: Any) -> Any:
        from typer._param_types import coerce_cli_path

        try:  # Typer's own check and value; its message, if any, comes from Typer's path
            return coerce_cli_path(
                value, self.info, path_type=self.annotation, param=self.param, ctx=ctx
            )
        except Exception:
            return _NOT_PLAIN


def read_plainly(command: Any, ctx: Any) -> None:
    """Give each Typer option and argument of ``command`` run under ``ctx`` (or a child of
    it), its ``--help`` included, a :class:`PlainValues` (where Typer has not built its own)."""
    params = command.get_params(ctx) if hasattr(command, "get_params") else ()
    for param in params:
        if getattr(param, "_runtime_param", False) is None and hasattr(param, "type_descriptor"):
            param._runtime_param = PlainValues(param)
