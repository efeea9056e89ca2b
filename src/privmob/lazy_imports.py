"""Modules imported on first use, so that a command imports only what it runs.

pandas, GeoPandas and PyArrow cost about 1.5 CPU seconds of imports on a small machine, more
than the plan of a release and often more than the release itself. The modules a command
goes through before its plan (the release specs, the session, the ledger) use them only
inside functions, so they name them with :func:`lazy_module`, which imports the module the
first time one of its attributes is read:

.. code-block:: text

    if TYPE_CHECKING:
        import pandas as pd
    else:
        pd = lazy_module("pandas")

The type checker sees the real import; at run time ``pd.DataFrame`` imports pandas on first
use (and ``"pandas" in sys.modules`` stays false until then). This is the spelling, before
Python 3.15, of PEP 810's ``lazy import pandas as pd``. ``tests/cli/test_startup_imports.py``
checks that a release prints its plan before pandas or GeoPandas is imported.

NumPy and pandas, which most modules need, are named once here: ``from
privmob.lazy_imports import np, pd`` gives the same lazy stand-ins to every module (and the
real modules to the type checker).
"""

from __future__ import annotations

import importlib
import types
from typing import TYPE_CHECKING, Any

__all__ = ["LazyModule", "lazy_module", "np", "pd"]


class LazyModule(types.ModuleType):
    """A stand-in for the module ``name``: the first attribute read imports it; its names
    are then copied here, so that later reads are plain look-ups."""

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self.__name__)
        self.__dict__.update(module.__dict__)
        return getattr(module, attr)

    def __dir__(self) -> list[str]:
        return dir(importlib.import_module(self.__name__))

    def __repr__(self) -> str:
        return f"<lazy module {self.__name__!r}>"


def lazy_module(name: str) -> Any:
    """The module ``name``, imported when one of its attributes is first read."""
    return LazyModule(name)


if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")
