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

from pathlib import Path
from typing import Annotated

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


def check_test_mode(ledger: str | Path | None, seed: int | None, test_mode: bool) -> None:
    """Refuse (:class:`ConfigError`) ``--seed`` without ``--test-mode`` and ``--ledger`` with
    it. In test mode the session charges a throw-away ledger in a private temporary folder,
    removed when the command ends, and marks the release not for publication."""
    if not test_mode:
        if seed is not None:
            raise ConfigError(
                "--seed makes the noise predictable: it is for tests only",
                hint="add --test-mode (a throw-away ledger; the output is stamped not for "
                "publication), or leave --seed out for a release",
            )
        return
    if ledger is not None:
        raise ConfigError(
            "--test-mode never charges a persistent ledger",
            hint="leave --ledger out: test mode uses a throw-away ledger",
        )
