"""How the ``privmob`` command ends when something goes wrong.

* A :class:`~privmob.errors.PrivmobError` is printed as one message plus a hint, literally
  (a file called ``nofile[x].parquet`` prints as such: user and data text is never read as
  console markup), and the process exits with the error's code (2 input or configuration,
  3 budget refused, 4 output cannot be written).
* Anything else is an internal error: the traceback goes to a private report file (mode 0600)
  and the screen gets one line with its path; exit code 1.

Data-dependent specifics of an error (exact counts of bad records) are printed only with
``privmob --verbose``.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import traceback
from pathlib import Path

from rich.text import Text

from privmob.errors import EXIT_INPUT, EXIT_INTERNAL, EngineError, PrivmobError

#: set by ``privmob --verbose`` (or PRIVMOB_VERBOSE=1): show an error's data-dependent detail
VERBOSE = {"on": os.environ.get("PRIVMOB_VERBOSE", "") not in ("", "0")}


def labelled(label: str, style: str, text: str) -> Text:
    """``label`` styled, then ``text`` exactly as it is (no markup, no highlighting)."""
    return Text.assemble((label, style), " ", Text(text))


def report_error(exc: PrivmobError) -> None:
    """Print a privmob error: message, hint and (with --verbose) its detail, literally."""
    from privmob.cli.common import console_err

    console_err.print(labelled("error:", "bold red", exc.message), highlight=False, soft_wrap=True)
    if exc.hint:
        console_err.print(labelled("hint:", "yellow", exc.hint), highlight=False, soft_wrap=True)
    if exc.detail:
        if VERBOSE["on"]:
            console_err.print(
                labelled("detail:", "dim", exc.detail), highlight=False, soft_wrap=True
            )
        else:
            console_err.print(
                Text("(privmob --verbose ... shows exact counts)", style="dim"),
                highlight=False,
                soft_wrap=True,
            )


def report_internal_error(exc: BaseException) -> Path | None:
    """Write the traceback to a private report file and print one line naming it."""
    from privmob import __version__
    from privmob.cli.common import console_err

    path: Path | None
    try:
        fd, name = tempfile.mkstemp(prefix="privmob-error-", suffix=".txt")  # mode 0600
        with os.fdopen(fd, "w") as f:
            f.write(f"privmob {__version__}, Python {platform.python_version()}, ")
            f.write(f"{platform.platform()}\ncommand: privmob {' '.join(sys.argv[1:])}\n\n")
            f.write("".join(traceback.format_exception(exc)))
        path = Path(name)
    except OSError:
        path = None
    where = f"a report is in {path} (private to you)" if path else "no report could be written"
    console_err.print(
        labelled(
            "internal error:",
            "bold red",
            f"{type(exc).__name__}; this is a bug in privmob, not in your input; {where}",
        ),
        highlight=False,
        soft_wrap=True,
    )
    return path


def out_of_memory_error(argv: list[str]) -> PrivmobError:
    """The error printed when the run ran out of memory: the limit it had (``--memory-limit``
    of ``argv``) and the one to try."""
    from privmob.engine.memory import memory_advice

    limit = None
    for i, arg in enumerate(argv):
        if arg == "--memory-limit" and i + 1 < len(argv):
            limit = argv[i + 1]
        elif arg.startswith("--memory-limit="):
            limit = arg.split("=", 1)[1]
    message, hint = memory_advice(limit)
    return EngineError(message + ("" if charged_here() else "; nothing was charged"), hint=hint)


def charged_here() -> bool:
    """Whether this process charged a ledger (never imports the ledger to find out)."""
    return bool(getattr(sys.modules.get("privmob.privacy.ledger"), "COMMITTED", None))


def run(app: object, argv: list[str] | None) -> None:
    """Run the app, turning every failure into its exit code and one message, its hints in the
    command line's words (:func:`privmob.surface.command_line`). ``--verbose`` is accepted
    anywhere on the line (``privmob od ... --verbose`` as well as ``privmob --verbose od
    ...``)."""
    from privmob.surface import command_line

    with command_line():
        _run(app, argv)


def _run(app: object, argv: list[str] | None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--verbose" in args[1:]:
        VERBOSE["on"] = True
        args = [args[0], *(a for a in args[1:] if a != "--verbose")]
    argv = args
    from privmob.engine.memory import out_of_memory
    from privmob.engine.rundir import interrupted

    try:
        app(args=argv, standalone_mode=True)  # type: ignore[operator]
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        if interrupted() is not None:  # what a signal broke is not an error of the input
            raise  # the caller prints one line and exits 128 + the signal
        if out_of_memory(exc):  # whatever the step that met it called it (never the file)
            report_error(out_of_memory_error(argv))
            sys.exit(EXIT_INPUT)
        if isinstance(exc, PrivmobError):
            report_error(exc)
            sys.exit(exc.exit_code)
        report_internal_error(exc)
        sys.exit(EXIT_INTERNAL)
