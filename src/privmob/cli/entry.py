"""The ``privmob`` console script (and ``python -m privmob``): the command line
(:func:`privmob.cli.main`), then an exit that skips tearing the interpreter down.

Tearing down a process that has imported pandas, GeoPandas, PyArrow and DuckDB (about 1,000
modules and 100,000 objects, freed one by one) costs 0.15-0.3 CPU seconds after the command has
finished, a third of a small release's fixed cost; the operating system frees the memory at
once. So once the command returns, the exit runs what a normal exit runs that matters (the
``atexit`` handlers: the run directory and DuckDB's spill directory removed, ``weakref``
finalizers, logging flushed; stdout and stderr flushed) and ends the process with its exit
status without the teardown. Files a release writes are closed before it is published, and the
ledger closes its connection after each use, so nothing is left unwritten.

The normal exit is kept when a thread other than the main one is still running without being
a daemon (Python would wait for it) and when ``main`` is imported and called in-process (tests,
notebooks): only this entry point exits early.

The entry point also runs Python's cycle collector less often (:data:`YOUNG_THRESHOLD`): with
the default (a collection every 700 new container objects), importing what a release needs
and building its outputs triggered some 285 young and 2 full collections, 0.10-0.12 CPU
seconds of every command (measured with ``gc.callbacks`` on ``privmob report``); with 50,000,
4 young ones and no full one, 0.05 s. Reference counting frees everything not in a cycle at
once, as before; cycles wait a little longer.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from typing import NoReturn

#: new container objects between two young collections of the cycle collector in the
#: ``privmob`` process (Python's default: 700); the older generations' thresholds are kept
YOUNG_THRESHOLD = 50_000


def main() -> NoReturn:
    """Run the command line, then :func:`quick_exit` with its status."""
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    from privmob.cli import main as command_line

    try:
        command_line()
    except SystemExit as stop:
        quick_exit(stop.code)
    quick_exit(0)


def exit_status(code: object) -> int:
    """The process's exit status for ``SystemExit(code)``, as the interpreter turns it: None
    is 0, an int is itself, anything else is printed on stderr and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def quick_exit(code: object) -> NoReturn:
    """Exit with ``code`` after the ``atexit`` handlers and flushing stdout and stderr, without
    the interpreter's teardown; a normal exit when a non-daemon thread still runs."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if any(not t.daemon for t in others):
        raise SystemExit(code)  # Python joins it before exiting, as without this module
    status = exit_status(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe (`privmob ... | head`): as Python does
            status = status or 120
    os._exit(status)
