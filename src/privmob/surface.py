"""Which surface a person is using, the command line or Python, and what it changes: the words
of a hint and the line a warning points at.

- :func:`option` names an option as that surface spells it: ``--overwrite`` on the command
  line, ``overwrite=True`` in Python (the :class:`~privmob.session.Session` API). The command
  line says so once, around the whole command (:func:`command_line`, from
  ``privmob.cli.failure.run``); anything else is Python. One table, :data:`OPTIONS`, holds both
  spellings: a message is written once.
- :func:`spelled` picks between two whole phrases, where the surfaces differ in more than an
  option's name (``leave out --format`` / ``formats=None``).
- :func:`warn_caller` issues a warning at the caller's line: the first frame outside the
  privmob package (a notebook cell, the user's script), whatever the depth of the call.

This module imports nothing heavy.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from types import FrameType

#: the surface of the running code: "python" unless the command line said otherwise
_SURFACE: ContextVar[str] = ContextVar("privmob_surface", default="python")

#: option -> (its command-line spelling, its Python spelling); a value follows either
OPTIONS: dict[str, tuple[str, str]] = {
    "output": ("--output", "output="),
    "overwrite": ("--overwrite", "overwrite=True"),
    "dataset": ("--dataset", "dataset="),
    "new_dataset_for_same_data": ("--new-dataset-for-same-data", "new_dataset_for_same_data=True"),
    "yes": ("--yes", "confirm=True"),
    "epsilon": ("--epsilon", "epsilon="),
    "unit": ("--unit", "unit="),
    "records": ("--records", "records="),
    "memory_limit": ("--memory-limit", "memory_limit="),
    "spill_dir": ("--spill-dir", "spill_dir="),
}


@contextmanager
def command_line() -> Iterator[None]:
    """Within it, hints name command-line options (``privmob`` runs every command in it)."""
    token = _SURFACE.set("cli")
    try:
        yield
    finally:
        _SURFACE.reset(token)


def on_command_line() -> bool:
    """True while a ``privmob`` command runs (:func:`command_line`)."""
    return _SURFACE.get() == "cli"


def option(name: str, value: str | None = None) -> str:
    """The option ``name`` (a key of :data:`OPTIONS`) as the current surface spells it, with
    ``value`` when given: ``--dataset trips`` on the command line, ``dataset="trips"`` in
    Python."""
    cli, python = OPTIONS[name]
    if on_command_line():
        return cli if value is None else f"{cli} {value}"
    return python if value is None else f'{python}"{value}"'


def spelled(cli: str, python: str) -> str:
    """A phrase as the current surface says it: ``cli`` on the command line, else ``python``
    (for hints whose two spellings differ in more than one option's name)."""
    return cli if on_command_line() else python


#: the folder of the privmob package: frames in it are privmob's, not the caller's
PACKAGE = Path(__file__).resolve().parent


def _outside(filename: str) -> bool:
    try:
        return not Path(filename).resolve().is_relative_to(PACKAGE)
    except (OSError, ValueError):
        return True  # "<stdin>", "<ipython-input-...>": the user's own


def warn_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` at the caller's line: the first frame outside the privmob package
    (the user's cell or file), not privmob's source, whatever the depth of the call."""
    level = 2  # the frame that called this
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and not _outside(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
