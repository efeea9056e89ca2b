"""What a release will cost and need, from its public parameters only (:class:`Plan`), and the
memory estimate of a dense count domain (:func:`domain_memory`). Every spec's ``plan()`` makes
one; nothing here reads data."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from privmob.errors import ConfigError
from privmob.privacy.costs import Cost
from privmob.surface import spelled

#: bytes per cell of a dense count domain: exact counts, noisy values, published values (int64)
#: and the released-cells mask
BYTES_PER_CELL = 3 * 8 + 1
#: bytes per row of a long output table (period, origin, destination, count in pandas and
#: Arrow, with the copies made while the table is built). With BYTES_PER_CELL, calibrated on
#: OD matrices (benchmarks/bench_plan_memory.py: 0.3M, 4.9M and 25M cells grew the process by
#: 127-130 bytes per cell, plus about 40 MB at any size)
BYTES_PER_ROW = 104
#: memory a release takes beyond its domain (engine buffers, Arrow results, the noise sampler)
RELEASE_BASE_BYTES = 40 * 2**20


def domain_memory(cells: int, rows: int) -> int:
    """The memory a release needs for ``cells`` dense domain cells and ``rows`` output rows."""
    return RELEASE_BASE_BYTES + cells * BYTES_PER_CELL + rows * BYTES_PER_ROW


@dataclass(frozen=True)
class Plan:
    """What a release will cost and need, from public parameters only (no data is read).

    ``cells``: noisy cells of the public domain; ``memory_bytes``: estimate of the dense domain
    and output table in memory; ``output_rows``: rows of the main table; ``margin_of_error_95``:
    half-width of the 95% interval of the noise on one cell.
    """

    kind: str
    cost: Cost
    cells: int
    memory_bytes: int
    output_rows: int
    margin_of_error_95: float
    noise: str
    parts: int = 1
    #: more lines said with the plan (the layer files' sizes, set by the session)
    notes: tuple[str, ...] = ()

    def check_memory(
        self, memory_limit: int | None, baseline: int = 0, *, guard: bool = False
    ) -> None:
        """Refuse, with what to change, a plan that would not fit in ``memory_limit`` bytes for
        the whole process, of which ``baseline`` bytes are already in use (Python and the
        libraries; ``privmob.engine.memory``). ``guard``: the limit is the default guard (what
        the machine has available), not a ``--memory-limit``."""
        if memory_limit is None or self.memory_bytes <= memory_limit - baseline:
            return
        used = f" on top of the {baseline / 1e9:.2f} GB the process uses" if baseline else ""
        over = (
            f"more than the {memory_limit / 1e9:.2f} GB this machine has available"
            if guard
            else f"over the memory limit of {memory_limit / 1e9:.2f} GB"
        )
        from privmob.engine.memory import ENGINE_FLOOR

        need = -(-(baseline + self.memory_bytes + ENGINE_FLOOR) // 10**6)  # and the engine's
        raise ConfigError(
            f"this {self.kind} release needs about {self.memory_bytes / 1e9:.2f} GB for "
            f"{self.cells:,} cells{used}, {over}",
            hint="use a coarser tessellation, fewer periods (a longer bin or a shorter study "
            + (
                "period), or free memory on this machine"
                if guard
                else f"period) or a memory limit of at least {need}MB"
            ),
        )

    def signal_needed(self) -> str:
        """What the 95% margin means for a cell, from public parameters only: the true count
        a cell must exceed to be told from an empty one, and the count for a +-50% error."""
        m = self.margin_of_error_95
        if m != m:  # NaN: no single per-cell margin (density)
            return "no single per-cell margin (the noise is not added cell by cell)"
        if m < 1:
            return "a cell of 1 is told from an empty one"
        return (
            f"a cell is told from an empty one only above {m:,.0f} and has a +-50% error at "
            f"{2 * m:,.0f}; a smaller expected count per cell is noise (--max-margin refuses "
            "such a plan before reading)"
        )

    def check_margin(self, max_margin: float | None) -> None:
        """Refuse, before any data is read, a plan whose 95% margin of error per cell is above
        ``max_margin`` (the expected signal per cell, stated by the user)."""
        if max_margin is None:
            return
        m = self.margin_of_error_95
        if m != m:
            raise ConfigError(
                f"a {self.kind} release has no single 95% margin per cell to compare with "
                "the maximum margin",
                hint=spelled("leave out --max-margin", "leave out max_margin=")
                + " for this release",
            )
        if m > max_margin:
            raise ConfigError(
                f"this {self.kind} release's 95% margin of error is +/-{m:,.1f} per cell, above "
                f"the maximum margin {max_margin:,.1f}: its cells would be noise; nothing was "
                "read or charged",
                hint="raise epsilon, lower the bound (-T), use coarser zones or periods (more "
                "per cell), or raise --max-margin",
            )

    def summary(self) -> str:
        text = (
            f"{self.kind}: cost {self.cost.describe()}, {self.cells:,} cells, "
            f"~{self.memory_bytes / 1e6:,.1f} MB, {self.output_rows:,} rows, "
            f"95% margin of error +/-{self.margin_of_error_95:,.1f} per cell"
        )
        return "; ".join([text, self.signal_needed(), *self.notes])

    @property
    def warning(self) -> str | None:
        """A warning from public parameters, shown before anything is read or charged, and
        refused there unless confirmed: an epsilon below 0.1, more cells than
        :data:`~privmob.privacy.signal.LARGE_PLAN_CELLS`
        (:func:`privmob.privacy.signal.low_epsilon_warning`, :func:`~privmob.privacy.signal.
        large_plan_warning`)."""
        from privmob.privacy.signal import large_plan_warning, low_epsilon_warning

        said = (
            low_epsilon_warning(self.cost.epsilon, self.margin_of_error_95),
            large_plan_warning(self.cells, self.margin_of_error_95),
        )
        return " ".join(w for w in said if w) or None

    def _repr_html_(self) -> str:
        """The plan as a table in a notebook (what :meth:`summary` says, one row a figure)."""
        from html import escape

        rows = [
            ("plan", self.kind),
            ("privacy cost", self.cost.describe()),
            ("noisy cells", f"{self.cells:,}"),
            ("memory", f"~{self.memory_bytes / 1e6:,.1f} MB"),
            ("output rows", f"{self.output_rows:,}"),
            ("95% margin of error", f"+/-{self.margin_of_error_95:,.1f} per cell"),
            ("noise", self.noise),
        ]
        if self.parts > 1:
            rows.append(("ledger entries", str(self.parts)))
        body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
        warning = f"<p><b>warning</b>: {escape(self.warning)}</p>" if self.warning else ""
        return (
            f"<table>{body}</table>{warning}"
            "<p>No data is read and nothing is charged by a plan.</p>"
        )


class PlannedOnce:
    """A spec's ``plan()``: its :meth:`make_plan`, worked out once from its public parameters
    and kept on the spec (a spec that cannot be planned raises at each call)."""

    def make_plan(self) -> Plan:
        raise NotImplementedError

    @cached_property
    def _plan(self) -> Plan:
        return self.make_plan()

    def plan(self) -> Plan:
        return self._plan
