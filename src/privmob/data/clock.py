"""The two time zones of a release: the zone of its days, hours and bins, and the zone that
timestamps written without an offset (naive) are read in.

They differ for data logged in UTC without an offset and released in local time
(``--input-timezone UTC --timezone America/New_York``). :class:`Clock` *is* the binning zone's
name (a ``str``, so every loader that takes ``timezone=`` takes it unchanged) and carries the
naive timestamps' zone in :attr:`Clock.naive`.
"""

from __future__ import annotations


class Clock(str):
    """``Clock("America/New_York", naive="UTC")``: bins in New York time, naive timestamps
    read as UTC. Without ``naive``, naive timestamps are read in the binning zone."""

    naive: str

    def __new__(cls, zone: str = "UTC", naive: str | None = None) -> Clock:
        clock = super().__new__(cls, zone)
        clock.naive = naive or zone
        return clock

    def __repr__(self) -> str:
        return f"Clock({str(self)!r}, naive={self.naive!r})"


def clock(timezone: str, input_timezone: str | None = None) -> str:
    """``timezone`` alone, or a :class:`Clock` when naive timestamps are in another zone."""
    if input_timezone is None or input_timezone == timezone:
        return timezone
    from privmob.data.sources import check_timezone

    check_timezone(input_timezone)
    return Clock(timezone, naive=input_timezone)


def naive_zone(timezone: str) -> str:
    """The zone naive timestamps are read in (the binning zone unless a :class:`Clock` says)."""
    return getattr(timezone, "naive", timezone)
