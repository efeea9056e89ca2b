"""``--test-mode``: the only way a seed reaches the noise of a command.

Seeded noise is predictable (a small seed can be brute-forced and the noise subtracted), so it
must never be charged to a real budget nor look like a publishable release:

* ``--seed`` is refused without ``--test-mode``;
* test mode refuses a persistent ledger (``--ledger``): it charges a throw-away ledger in a
  private temporary folder, removed when the command ends;
* the seed is recorded in ``metadata.json`` (``test_mode``), and every data file is stamped
  not for publication (:mod:`privmob.releases.stamp`; the HTML report shows a banner).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from privmob.errors import ConfigError

TestModeOpt = Annotated[
    bool,
    typer.Option(
        "--test-mode",
        help="TESTS ONLY: allows --seed; charges a throw-away ledger (refuses --ledger) and "
        "stamps every output file 'not for publication'",
    ),
]


def ledger_for(ledger: Path | None, seed: int | None, test_mode: bool) -> Path | None:
    """The ledger a command charges: ``ledger`` normally; a throw-away one in test mode.

    Raises :class:`ConfigError` for ``--seed`` without ``--test-mode`` and for ``--ledger``
    with it."""
    if not test_mode:
        if seed is not None:
            raise ConfigError(
                "--seed makes the noise predictable: it is for tests only",
                hint="add --test-mode (a throw-away ledger; the output is stamped not for "
                "publication), or leave --seed out for a release",
            )
        return ledger
    if ledger is not None:
        raise ConfigError(
            "--test-mode never charges a persistent ledger",
            hint="leave --ledger out: test mode uses a throw-away ledger",
        )
    folder = Path(tempfile.mkdtemp(prefix="privmob-test-ledger-"))  # mode 0700
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder / "ledger.sqlite"


def test_mode_marks(seed: int | None, test_mode: bool) -> list[Callable[[Any], None]]:
    """What :class:`~privmob.releases.base.Accountant` applies to a release before it is
    charged and written: in test mode the seed is recorded and the release marked not for
    publication (:func:`privmob.releases.stamp.test_mode_mark`); nothing otherwise."""
    from privmob.releases.stamp import test_mode_mark

    return [test_mode_mark(seed)] if test_mode else []
