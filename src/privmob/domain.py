"""Public domains every layer shares: study periods split into days or weeks (:class:`Period`,
``pm.Period``), and grids of fixed time bins, declared from public parameters before any data
is read.

A ground module: it imports nothing of privmob but :mod:`privmob.errors`, so that loading
(``data``), the releases, the session and the CLI all use the same types.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING

from privmob.errors import ConfigError
from privmob.json_types import JSONObject
from privmob.surface import spelled

if TYPE_CHECKING:
    import pandas as pd

PERIOD_SECONDS = {"day": 86_400, "week": 7 * 86_400}
#: the bins of a :class:`Period`
PERIOD_BINS = ("all", "day", "week")


@dataclass(frozen=True, init=False)
class Period:
    """A declared, public study period ``[start, end)`` in local wall-clock time, cut into bins:
    ``pm.Period("2024-01-01", "2024-02-01", bin="day")``. Dates are never read from the data.

    ``bin`` (the :attr:`granularity`) is ``all`` (one bin), ``day`` or ``week`` (weeks start
    on ``start``). With ``all`` and no declared range, every record is in the single bin.
    ``start`` and ``end``: dates, datetimes or ISO text (naive local times).
    """

    granularity: str = "all"
    start: datetime | None = None
    end: datetime | None = None

    def __init__(
        self,
        start: str | date | None = None,
        end: str | date | None = None,
        *,
        bin: str = "all",
    ) -> None:
        if isinstance(start, str) and start in PERIOD_BINS:
            raise ConfigError(
                f"Period({start!r}, ...) reads {start!r} as the start date",
                hint=f'the bin is a keyword: Period(start, end, bin="{start}"), or '
                f'Period.parse("{start}", start, end) (the earlier StudyPeriod order)',
            )
        object.__setattr__(self, "granularity", bin)
        object.__setattr__(self, "start", parse_date(start))
        object.__setattr__(self, "end", parse_date(end))
        self._check()

    def _check(self) -> None:
        if self.granularity not in PERIOD_BINS:
            raise ConfigError(f"unknown period '{self.granularity}'", hint="use all, day or week")
        if (self.start is None) != (self.end is None):
            raise ConfigError("declare both the start and the end of the study period")
        if self.granularity != "all" and self.start is None:
            raise ConfigError(
                f"{spelled('--bin', 'bin=')} {self.granularity} needs a declared study period",
                hint="pass "
                + spelled(
                    "--start 2024-01-01 --end 2024-02-01",
                    'Period("2024-01-01", "2024-02-01", bin=...)',
                )
                + " (public dates, never read from the data)",
            )
        if self.start is not None and self.end is not None:
            check_order(self.start, self.end)

    @classmethod
    def parse(cls, granularity: str, start: str | date | None, end: str | date | None) -> Period:
        """The period of ``granularity`` bins from ``start`` to ``end`` (positional)."""
        return cls(start, end, bin=granularity)

    @property
    def declared(self) -> bool:
        return self.start is not None

    @property
    def seconds(self) -> int | None:
        return PERIOD_SECONDS.get(self.granularity)

    @property
    def n_bins(self) -> int:
        if self.granularity == "all" or self.start is None or self.end is None:
            return 1
        total = (self.end - self.start).total_seconds()
        step = PERIOD_SECONDS[self.granularity]
        return int(-(-total // step))

    def labels(self) -> list[str]:
        """Public label of each bin: its start date (ISO), or ``all``."""
        if self.granularity == "all" or self.start is None:
            return ["all"]
        step = timedelta(seconds=PERIOD_SECONDS[self.granularity])
        return [(self.start + i * step).date().isoformat() for i in range(self.n_bins)]

    def bin_sql(self, time_col: str, dialect: object) -> str:
        """SQL: the bin index of ``time_col``, or -1 outside the declared period."""
        if self.start is None or self.end is None:
            return "0"
        s = f"TIMESTAMP '{self.start.isoformat(sep=' ')}'"
        e = f"TIMESTAMP '{self.end.isoformat(sep=' ')}'"
        inside = f"{time_col} >= {s} AND {time_col} < {e}"
        if self.granularity == "all":
            return f"CASE WHEN {inside} THEN 0 ELSE -1 END"
        epoch = dialect.epoch_seconds  # type: ignore[attr-defined]
        step = PERIOD_SECONDS[self.granularity]
        # clamped to the public bins: whole-second rounding of a declared start or end with
        # fractions must not put a time inside the period into a bin outside the domain
        index = f"CAST(FLOOR(({epoch(time_col)} - {epoch(s)}) / {step}) AS INT)"
        return f"CASE WHEN {inside} THEN LEAST(GREATEST({index}, 0), {self.n_bins - 1}) ELSE -1 END"

    def to_dict(self) -> JSONObject:
        return {
            "granularity": self.granularity,
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat() if self.end else None,
            "bins": self.n_bins,
        }


#: the earlier name of :class:`Period` (one type: ``privmob.dp.Period`` is this class)
StudyPeriod = Period


def check_order(start: datetime, end: datetime) -> None:
    """Refuse a declared period ``[start, end)`` that does not end after it starts, with what
    to write instead (the dates are public parameters: they may be shown)."""
    if end > start:
        return
    said = spelled(
        f"--start {_text(start)} --end {_text(end)}",
        f'Period("{_text(start)}", "{_text(end)}")',
    )
    if end == start:
        raise ConfigError(
            f"the study period is empty: {said}; the end is excluded",
            hint=f"end it after it starts: for the one day {_text(start)}, "
            + spelled(
                f"--end {_text(start + timedelta(days=1))}",
                f'end="{_text(start + timedelta(days=1))}"',
            ),
        )
    raise ConfigError(
        f"the study period ends before it starts: {said}",
        hint="swap them: "
        + spelled(
            f"--start {_text(end)} --end {_text(start)}",
            f'Period("{_text(end)}", "{_text(start)}")',
        )
        + " (the start is included, the end excluded)",
    )


def _text(moment: datetime) -> str:
    """A declared date as the user would write it: the date alone at midnight."""
    return moment.date().isoformat() if moment.time() == time() else moment.isoformat(sep=" ")


def parse_date(value: str | date | None) -> datetime | None:
    """A declared (public) date or datetime as a naive local datetime; None stays None."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    try:
        return datetime.fromisoformat(str(value)).replace(tzinfo=None)
    except ValueError as exc:
        raise ConfigError(f"cannot read the date '{value}'", hint="use YYYY-MM-DD") from exc


def time_grid(start: str, end: str, freq: str) -> pd.DatetimeIndex:
    """The public time bins: left edges of [start, end) every ``freq`` (e.g. 1h, 1D)."""
    import numpy as np
    import pandas as pd

    try:
        grid = pd.date_range(pd.Timestamp(start), pd.Timestamp(end), freq=freq, inclusive="left")
    except (ValueError, TypeError) as exc:
        bins = spelled("--bin 1h", 'bin="1h"')
        raise ConfigError(f"cannot build the time bins: {exc}", hint=f"e.g. {bins}") from exc
    if len(grid) < 2:
        check_order(pd.Timestamp(start).to_pydatetime(), pd.Timestamp(end).to_pydatetime())
        raise ConfigError(
            f"the period [{start}, {end}) holds fewer than two time bins of {freq}",
            hint=f"declare a longer period or a shorter {spelled('--bin', 'bin=')}",
        )
    if np.unique(np.diff(grid.asi8)).size != 1:
        raise ConfigError("time bins must have a fixed length (use h, min, D or a multiple)")
    # the last bin must end exactly at the declared end: otherwise events after --end would be
    # counted inside the period instead of in the outliers cell
    if grid[-1] + (grid[1] - grid[0]) != pd.Timestamp(end):
        raise ConfigError(
            f"the period [{start}, {end}) is not a whole number of {freq} bins",
            hint=spelled(
                "choose --end so that --end - --start is a multiple of --bin",
                "choose the end so that end - start is a multiple of the bin",
            ),
        )
    return grid
