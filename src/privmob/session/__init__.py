"""``privmob.Session``: the front door. One object holds the input, the public tessellation,
the engine and the accountant, and owns every release from its plan to its files
(:meth:`Session.run`); the Python API and every release command of the CLI go through it.

* :mod:`privmob.session.base`: the session's machinery: inputs read and validated once, the
  engine, the ledger, and the one release lifecycle (:meth:`Session.run`);
* :mod:`privmob.session.releases`: one typed method per release (``od``,
  ``population``, ``report``, ``series_counts``, ``density``, ``series``) and their
  ``plan_*`` twins;
* :mod:`privmob.session.ledger_view`: what was spent and what remains.
"""

from privmob.session.ledger_view import SessionLedger
from privmob.session.releases import Session

__all__ = ["Session", "SessionLedger"]
