"""The public landmark set of a series as positions in its time grid: given as positions
(integers) or as timestamps of the grid (text matched to the time labels, or a date or time),
for ``Session.series``, ``privmob series`` and ``privmob series-counts`` alike; and the mark of a
series whose time domain was read from its own rows."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from privmob.errors import ConfigError
from privmob.lazy_imports import pd

if TYPE_CHECKING:
    from privmob.releases.release import Release

#: a landmark: a position in the grid (0-based) or one of its timestamps
Landmark = int | str | datetime

#: the note of a release whose time domain is its file's rows (``domain_from_data``)
DOMAIN_FROM_DATA = (
    "NOT FOR PUBLICATION: the time domain was read from the data (--domain-from-data); its "
    "first and last dates and which steps exist are not protected"
)


def landmark_tokens(text: str, positions: bool) -> list[Landmark]:
    """The landmarks of a command-line list (or file, one a line): positions with
    ``positions``, else timestamps."""
    from privmob.data.series_input import split_list

    tokens = split_list(text)
    if not positions:
        return list(tokens)
    try:
        return [int(t) for t in tokens]
    except ValueError as exc:
        raise ConfigError(f"--landmark-positions expects integers: {exc}") from exc


def resolve_landmarks(landmarks: Sequence[Landmark], labels: Sequence[object]) -> list[int]:
    """The positions of ``landmarks`` in a grid of time ``labels``: an integer is a position
    already; a text or a date is looked for among the labels, as they are written or as
    timestamps (a landmark that is no label is refused: the set is public and declared)."""
    as_text = {str(v): i for i, v in enumerate(labels)}
    parsed: dict[object, int] | None = None  # the labels as timestamps, when one is needed
    out: list[int] = []
    for mark in landmarks:
        if isinstance(mark, int) and not isinstance(mark, bool):
            out.append(int(mark))
            continue
        idx = as_text.get(str(mark)) if isinstance(mark, str) else None
        if idx is None:
            parsed = _as_timestamps(labels) if parsed is None else parsed
        if idx is None and parsed:
            try:
                idx = parsed.get(pd.Timestamp(mark))
            except ValueError:
                idx = None
        if idx is None:
            raise ConfigError(
                f"landmark '{mark}' is not a timestamp of the series",
                hint="give values of the time column, or positions (integers; "
                "--landmark-positions on the command line)",
            )
        out.append(idx)
    return out


def _as_timestamps(labels: Sequence[object]) -> dict[object, int]:
    """Timestamp -> position of time ``labels`` (empty when they are not timestamps)."""
    try:
        stamps = pd.to_datetime(pd.Series(list(labels)), format="mixed")
    except (ValueError, TypeError):
        return {}
    return {ts: i for i, ts in enumerate(stamps)}


def mark_domain_from_data(release: Release) -> None:
    """Stamp a release whose time domain was read from its rows not for publication (applied
    before the charge, as every mark of the lifecycle)."""
    release.for_publication = False
    release.publication_note = DOMAIN_FROM_DATA
