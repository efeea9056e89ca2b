"""privmob: differentially private mobility statistics with per-person guarantees."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("privmob")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+local"

__all__ = ["__version__"]
