"""Optional parts of privmob and the message when one is missing (README, Install).

The main install (``pip install privmob`` / ``uv run privmob ...``) releases statistics with
DuckDB. Four extras add what only some commands need: ``spark`` (PySpark, the Spark engine),
``ml`` (scikit-learn, ``privmob audit ml``), ``plots`` (matplotlib, the plots of
``privmob evaluate``, ``series-utility`` and ``audit figures``) and ``h3`` (H3 hexagons,
``privmob tessellate --h3``). Their modules are imported
when first needed; a missing one stops the command with one message naming the extra.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from privmob.errors import ConfigError

#: module -> (distribution, extra)
EXTRAS = {
    "pyspark": ("PySpark", "spark"),
    "sklearn": ("scikit-learn", "ml"),
    "matplotlib": ("matplotlib", "plots"),
    "h3": ("h3", "h3"),
}


def install_hint(extra: str) -> str:
    return (
        f"install the '{extra}' extra: pip install 'privmob[{extra}]', "
        f"or uv run --extra {extra} privmob ..."
    )


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` (one of :data:`EXTRAS`) or stop with a message naming its extra."""
    dist, extra = EXTRAS[module.split(".")[0]]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"{purpose} needs {dist}, which is not installed", hint=install_hint(extra)
        ) from exc


def pyplot(purpose: str) -> Any:
    """``matplotlib.pyplot`` with the file-only Agg backend (the ``plots`` extra)."""
    matplotlib = require("matplotlib", purpose)
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")
