"""The checks of a release's loaded input: tiled with the release's tessellation, and of the
shape the release counts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from privmob.errors import ConfigError

if TYPE_CHECKING:
    from privmob.data.tessellation import Tessellation


def check_tessellation(data: object, tessellation: Tessellation) -> None:
    """Raise :class:`ConfigError` when ``data`` was loaded with another tessellation than the
    one the release is given (its tile indexes would be mislabelled or out of the domain), or
    when ``tessellation`` is not a :class:`~privmob.data.tessellation.Tessellation`."""
    if not hasattr(tessellation, "tile_ids") or not hasattr(tessellation, "k"):
        raise ConfigError(
            f"cannot use {type(tessellation).__name__} as a tessellation here",
            hint="load it first with privmob.data.tessellation_input.load_tessellation (or use "
            "privmob.Session, which accepts a path or a GeoDataFrame)",
        )
    loaded = data
    while getattr(loaded, "base", None) is not None and getattr(loaded, "derive", None):
        loaded = getattr(loaded, "base")  # noqa: B009 (any loaded input: duck-typed)
    tiles = getattr(data, "tiles", None) or getattr(loaded, "tiles", None)
    mine = getattr(tessellation, "fingerprint", None)
    if tiles is not None and mine is not None and tiles != mine:
        raise ConfigError(
            "the input was loaded with another tessellation than the one given to the release",
            hint="load the input and run the release with the same tessellation "
            "(privmob.Session takes it once)",
        )


def check_input(
    data: object, tessellation: Tessellation, expected: str, release: str, hint: str
) -> None:
    """Raise :class:`ConfigError` when ``data`` (a loaded input) was tiled with another
    tessellation (:func:`check_tessellation`) or has another shape than the release counts
    (e.g. trip points given to the OD matrix, which counts one-row trips)."""
    check_tessellation(data, tessellation)
    shape = getattr(data, "shape", None)
    if shape is not None and shape != expected:
        raise ConfigError(
            f"the {release} counts {expected.replace('_', ' ')}, but was given "
            f"{shape.replace('_', ' ')}",
            hint=hint,
        )
