"""Out-of-core counting: split the users into hash buckets sized to the memory limit.

DuckDB's window step (per-user bounding, trips from events) holds a whole partition set in
memory. To run on inputs larger than memory, the users are split into ``B`` buckets by a hash of
the user id; each bucket is bounded and counted on its own, and the dense bucket counts are
summed. Every user falls in exactly one bucket, so per-user bounding (and building trips from a
user's events) is exact within a bucket and the sum equals the single-pass result: privacy
semantics are unchanged. The bucket hash is not secret (it only partitions work); the bounding
hash keeps its own fresh key per bucket. The number of buckets depends only on the input's row
count and the memory limit, and nothing about the buckets reaches the output.

Partition once (DuckDB): with ``B > 1`` one streaming pass writes the validated, tile-assigned
input (only the columns the count needs) into ``B`` hash-partitioned Parquet files in a private
spill directory (mode 0700, under ``--spill-dir`` / the engine's temp directory); each bucket then
reads only its own file. The spill files hold user records: they are deleted when counting ends,
also after an error. Other engines (Spark) get filtered views of the input instead.

Parsed into user parts (DuckDB, a CSV input under a memory limit): the validation pass, which
writes a CSV's parsed input to a private file anyway, writes it in :class:`UserParts` by a hash of
the user id (as many as :func:`parts_for` plans from the file's size), and the buckets read those
parts as they are: the input is written once, not twice.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from privmob.engine.base import Engine
from privmob.engine.dialect import Dialect
from privmob.engine.relation import Loaded, UserParts, new_name
from privmob.errors import ConfigError, EngineError
from privmob.lazy_imports import np
from privmob.surface import option

if TYPE_CHECKING:
    import numpy.typing as npt

#: Engine memory one input row needs in the window steps of a bucket (events -> trips ->
#: bounding -> counts, or trips -> bounding -> counts). Measured on DuckDB 2.0 (docs/scale.md):
#: the peak RSS of one pass grows by 22-30 B per input event and 45 B per input trip above a
#: ~0.3 GB base; 80 B leaves a margin of about 2x (skewed users, other column types).
BYTES_PER_ROW = 80
#: Fraction of the memory limit one bucket may use (the rest: the base process, DuckDB's
#: buffers for reading and writing, the dense count vectors and the noise).
BUCKET_SHARE = 0.6
#: Share of the engine's memory (``--memory-limit`` minus the process's baseline RSS,
#: engine/memory.py) given to DuckDB's own ``memory_limit`` (it spills above it). DuckDB
#: allocates beyond its limit (results, writers): 0.8 peaked 13% above a 256 MB process limit
#: on 6.4M call records, 0.5 5% above it (benchmarks/bench_memory_limit.py).
DUCKDB_SHARE = 0.5
#: The user parts of an input (:func:`parts_for`) are planned for this share of the memory
#: limit: a row estimate from a file's size can be low. Trips, the input of the releases that
#: plan their buckets with the whole limit (od): half of it.
PARTS_MARGIN = 2
#: The same for trip points, the mobility report's input: the report plans its buckets with a
#: quarter of the limit (``REPORT_MEMORY_FACTOR``). Trips planned like points were parsed into
#: twice the parts they need: 100M NYC trips from CSV at 4 GB in 16 parts read in 68 s, in 8
#: parts in 59 s, the whole od release 141 s against 133 s (2026-12-02, the same run).
POINT_PARTS_MARGIN = 4
#: Below this much engine memory an input is parsed into one file, never into user parts: the
#: partitioned write holds a row group per open part and thread, and at a 512 MB limit (DuckDB's
#: share 113 MiB) 5M taxi-zone trips from CSV written in 4 parts ran out of memory where one
#: file and the buckets written after it did not (benchmarks/bench_memory_cap.py).
PARTS_MIN_MEMORY = 10**9
#: Engine memory per user part: an input is parsed into at most the limit over this many parts
#: (rounded down to a power of two); a count needing more buckets writes them (the spill path).
#: A margin, not a measured need: each open part holds a row group per writing thread (about
#: 10 MB for 122,880 rows of ten 8-byte columns); 30M trips in 8 parts peaked at 0.65 x 1200 MB.
PART_MEMORY = 64 * 10**6
#: Prefix of the spill directories (one per bucketed count, removed afterwards).
SPILL_PREFIX = "privmob-buckets-"
#: DuckDB memory the user-bucket writer (``PARTITION_BY``) needs per row it buffers, per open
#: bucket and thread: each thread buffers up to ``partitioned_write_flush_threshold`` rows
#: before writing them out, in blocks kept per bucket, so the writer's memory grows with the
#: number of buckets. One threshold for any number of buckets (the engine memory / 800 rows)
#: ran out of DuckDB's share at 1 GB on 50M records over 2,000 Voronoi cells, where the OD
#: domain leaves DuckDB 136 MiB: 94 buckets of the report's trip points with 356k rows, 23 of
#: od's trips with 361k; 94 buckets with 20k rows ran within it (benchmarks/bench_memory_cap.py,
#: 2026-12-02). This sets the threshold to DuckDB's share / (buckets x threads x 64 B).
WRITER_BYTES_PER_ROW = 64
#: the fewest rows a thread buffers before the bucket writer writes them (fewer: more, smaller
#: writes) and the most (DuckDB's default)
WRITER_FLUSH_ROWS = (2048, 524_288)

_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}


def parse_memory(text: str) -> int:
    """``"8GB"`` / ``"512MiB"`` / ``"2e9"`` -> bytes."""
    m = re.fullmatch(r"\s*([0-9.eE+]+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise ConfigError(f"cannot read memory limit '{text}'", hint="use e.g. 8GB or 512MB")
    try:
        value = float(m.group(1))
    except ValueError as exc:
        raise ConfigError(f"cannot read memory limit '{text}'", hint="use e.g. 8GB") from exc
    return int(value * _UNITS[m.group(2).upper()])


def bucket_expr(dialect: Dialect, n_buckets: int, user: str = "uid") -> str:
    """SQL: the bucket (0..n_buckets-1) of a user (a plain, unkeyed hash of the user id)."""
    return dialect.user_bucket(user, n_buckets)


def make_private(path: Path) -> None:
    """``path`` and everything under it readable by this user only (folders 0700, files 0600):
    what privmob writes of an input (user buckets, user parts, the parsed input) holds records."""
    for written in (path, *path.rglob("*")):
        os.chmod(written, 0o700 if written.is_dir() else 0o600)


def parquet_view(eng: Engine, view: str, files: Sequence[Path | str], empty: str) -> None:
    """Create ``view`` over the Parquet ``files`` (their folders' ``key=value`` names not read
    as columns), or as ``empty`` (a query of no rows with the same columns) where there are
    none: no user hashed into that bucket or part."""
    if not files:
        eng.create_view(view, empty)
        return
    listed = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
    eng.create_view(view, f"SELECT * FROM read_parquet([{listed}], hive_partitioning = false)")


def bucket_predicate(dialect: Dialect, n_buckets: int, bucket: int, user: str = "uid") -> str:
    """SQL true for the users of one bucket."""
    return f"{bucket_expr(dialect, n_buckets, user)} = {bucket}"


def source_rows(loaded: Loaded) -> int:
    """Rows of the input: as counted by its validation pass where it ran, else Parquet metadata
    when the source is a Parquet path, else a count (0.3 s for 10M CSV points through the
    tile join)."""
    counted = root(loaded).rows
    if counted is not None:
        return counted
    eng = loaded.engine
    path = Path(loaded.source)
    metadata = eng.dialect.parquet_rows_from_metadata
    if metadata and path.suffix.lower() in {".parquet", ".pq"} and path.exists():
        sql = f"SELECT count(*) AS n FROM read_parquet('{str(path).replace(chr(39), '')}')"
    elif metadata and path.is_dir() and any(path.glob("*.parquet")):
        sql = f"SELECT count(*) AS n FROM read_parquet('{path}/*.parquet')"
    else:
        sql = f"SELECT count(*) AS n FROM {root(loaded).view}"
    return int(eng.fetch(sql)["n"].iloc[0])


def buckets_for(rows: int, memory_limit: str | int, bytes_per_row: float | None = None) -> int:
    """Buckets so that one bucket's window work (``bytes_per_row`` per row, default
    ``BYTES_PER_ROW``) fits in ``BUCKET_SHARE`` of the limit."""
    limit = parse_memory(memory_limit) if isinstance(memory_limit, str) else int(memory_limit)
    if limit <= 0:
        raise ConfigError(f"the memory limit must be positive, got {memory_limit}")
    per_row = BYTES_PER_ROW if bytes_per_row is None else bytes_per_row
    return max(1, math.ceil(rows * per_row / (limit * BUCKET_SHARE)))


def parts_for(
    rows_estimate: int | None, memory_limit: str | int | None, margin: int = PARTS_MARGIN
) -> int:
    """How many user parts an input is parsed into (:class:`UserParts`): the buckets of
    ``rows_estimate`` rows at the default :data:`BYTES_PER_ROW` under ``memory_limit`` /
    ``margin`` (:data:`PARTS_MARGIN`; trip points: :data:`POINT_PARTS_MARGIN`), rounded up
    to a power of two (so that a count needing that many buckets or fewer, a power of two,
    takes whole parts); 1 without a limit or an estimate, or
    under :data:`PARTS_MIN_MEMORY`; at most ``memory_limit`` / :data:`PART_MEMORY`."""
    if memory_limit is None or not rows_estimate:
        return 1
    limit = parse_memory(memory_limit) if isinstance(memory_limit, str) else int(memory_limit)
    if limit < PARTS_MIN_MEMORY:
        return 1
    wanted = 1 << (buckets_for(rows_estimate, max(1, limit // margin)) - 1).bit_length()
    return min(wanted, 1 << (max(1, limit // PART_MEMORY).bit_length() - 1))


def plan_buckets(
    loaded: Loaded, memory_limit: str | int | None, bytes_per_row: float | None = None
) -> int:
    """How many user buckets keep one bucket's window work within the memory limit
    (``bytes_per_row``: what the release's window steps need per input row)."""
    if memory_limit is None or loaded.engine.dialect.manages_own_memory:
        return 1  # no limit given, or an engine that spills by itself (Spark)
    return buckets_for(source_rows(loaded), memory_limit, bytes_per_row)


def writer_flush_rows(engine_memory: int, n_buckets: int, threads: int) -> int:
    """``partitioned_write_flush_threshold`` for writing ``n_buckets`` user buckets with
    ``threads`` threads when the engine has ``engine_memory`` bytes (DuckDB's share of it:
    :func:`duckdb_memory_limit`): :data:`WRITER_BYTES_PER_ROW` per buffered row, per bucket
    and thread, within that share."""
    duck = int(engine_memory * DUCKDB_SHARE)
    rows = duck // (max(1, n_buckets) * max(1, threads) * WRITER_BYTES_PER_ROW)
    low, high = WRITER_FLUSH_ROWS
    return max(low, min(high, rows))


def duckdb_memory_limit(memory_limit: str | int) -> str:
    """DuckDB's own ``memory_limit`` for a privmob ``--memory-limit`` (a share of it: the
    process also holds Python, Arrow results and the count vectors)."""
    limit = parse_memory(memory_limit) if isinstance(memory_limit, str) else int(memory_limit)
    return f"{max(1, int(limit * DUCKDB_SHARE) // 2**20)}MiB"


# -- the derivation chain ----------------------------------------------------------------------


def root(loaded: Loaded) -> Loaded:
    """The loaded input a relation was derived from (itself when not derived)."""
    while loaded.base is not None and loaded.derive is not None:
        loaded = loaded.base
    return loaded


def rebuild(loaded: Loaded, base: Loaded) -> Loaded:
    """``loaded``'s derivation (trips from events, ...) applied to ``base`` instead of its root:
    engines do not push a user filter below a window, so buckets are cut at the input."""
    if loaded.base is not None and loaded.derive is not None:
        return loaded.derive(rebuild(loaded.base, base))
    return base


def user_buckets(loaded: Loaded, n_buckets: int) -> Iterator[Loaded]:
    """The input split into ``n_buckets`` disjoint filtered views by a hash of the user id
    (each view re-reads the input; :func:`spilled_buckets` reads it once)."""
    if n_buckets <= 1:
        yield loaded
        return
    for b in range(n_buckets):
        yield one_bucket(loaded, n_buckets, b)


def one_bucket(loaded: Loaded, n_buckets: int, bucket: int) -> Loaded:
    """The users of one bucket as a filtered view of the input."""
    base = root(loaded)
    view = new_name("bucket")
    pred = bucket_predicate(base.engine.dialect, n_buckets, bucket)
    base.engine.create_view(view, f"SELECT * FROM {base.view} WHERE {pred}")
    return rebuild(loaded, replace(base, view=view))


# -- partition once ----------------------------------------------------------------------------


def default_spill_parent(engine: object) -> Path:
    """Where spill directories go: the engine's spill / temp directory, else this run's private
    working directory (engine/rundir.py)."""
    for attr in ("spill_dir", "temp_directory"):
        value = getattr(engine, attr, None)
        if value:
            return Path(value)
    from privmob.engine.rundir import open_run_dir

    return open_run_dir().sub("buckets")


@contextmanager
def spill_directory(parent: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """A fresh private directory (mode 0700) under ``parent``, removed on exit (also on error).
    It holds user-level records: never leave it behind."""
    if parent is None:
        from privmob.engine.rundir import open_run_dir

        parent = open_run_dir().sub("buckets")  # this run's private working directory
    base = Path(parent)
    try:
        base.mkdir(parents=True, exist_ok=True)
        path = Path(tempfile.mkdtemp(prefix=SPILL_PREFIX, dir=base))  # created 0700
    except OSError as exc:
        raise ConfigError(
            f"cannot create a spill directory under {base}: {exc.strerror or exc}",
            hint=f"pass {option('spill_dir')} with a writable directory on a disk with room "
            "for the input",
        ) from exc
    try:
        os.chmod(path, 0o700)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def spilled_buckets(
    loaded: Loaded,
    n_buckets: int,
    directory: Path,
    columns: Sequence[str] | None = None,
) -> Iterator[Loaded]:
    """Write the input once into ``n_buckets`` user-hash partitions under ``directory`` (DuckDB,
    one streaming pass), then yield each bucket (reading only its own partition) with the
    derivation of ``loaded`` rebuilt on it. ``columns``: the input columns the count needs."""
    base = root(loaded)
    eng = base.engine
    cols = [c for c in (columns or base.columns) if c in base.columns] or list(base.columns)
    if "uid" not in cols:
        cols.insert(0, "uid")
    select = ", ".join(f'"{c}"' for c in cols)
    target = str(directory / "parts").replace("'", "''")
    bucket = bucket_expr(eng.dialect, n_buckets)
    con = eng.con  # type: ignore[attr-defined]
    engine_memory = getattr(eng, "memory_limit", None)
    try:
        with _writer_flush(con, engine_memory, n_buckets):
            con.execute(
                f"COPY (SELECT {select}, CAST({bucket} AS INTEGER) AS pm_bucket "
                f"FROM {base.view}) TO '{target}' (FORMAT parquet, PARTITION_BY (pm_bucket), "
                "COMPRESSION 'lz4_raw', OVERWRITE_OR_IGNORE)"
            )
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EngineError(
            f"writing the user buckets failed: {first}",
            hint="check the input files and the room in the spill directory "
            f"({option('spill_dir')})",
        ) from exc
    make_private(Path(target))
    for b in range(n_buckets):
        part = Path(target) / f"pm_bucket={b}"
        view = new_name("bucket")
        files = sorted(part.glob("*.parquet"))
        parquet_view(eng, view, files, f"SELECT {select} FROM {base.view} LIMIT 0")
        yield rebuild(loaded, replace(base, view=view, columns=cols))
        shutil.rmtree(part, ignore_errors=True)  # done with this bucket: free the disk


@contextmanager
def _writer_flush(con: object, engine_memory: int | None, n_buckets: int) -> Iterator[None]:
    """Under a memory limit, the bucket writer's flush threshold for ``n_buckets`` buckets
    (:func:`writer_flush_rows`) for the statement run inside; the engine's own afterwards."""
    if not engine_memory:
        yield
        return
    setting = "partitioned_write_flush_threshold"
    run = con.execute  # type: ignore[attr-defined]
    before, threads = run(
        f"SELECT current_setting('{setting}'), current_setting('threads')"
    ).fetchone()
    run(f"SET {setting} = {writer_flush_rows(int(engine_memory), n_buckets, int(threads))}")
    try:
        yield
    finally:
        run(f"SET {setting} = {int(before)}")


def parted_buckets(loaded: Loaded, parts: UserParts, n_buckets: int) -> Iterator[Loaded]:
    """The ``n_buckets`` user buckets of an input parsed into user parts (:class:`UserParts`;
    ``n_buckets`` from :meth:`UserParts.buckets`): each bucket's parts read as they are, the
    input's canonical view rebuilt over them, and the derivation of ``loaded`` on that."""
    base = root(loaded)
    eng = base.engine
    assert parts.rebase is not None
    for b in range(n_buckets):
        relation = new_name("bucket_parts")
        empty = f"SELECT * FROM {parts.whole} LIMIT 0"
        parquet_view(eng, relation, parts.files(n_buckets, b), empty)
        yield rebuild(loaded, replace(base, view=parts.rebase(relation)))


#: what a bucket's count gives: counts, or sums of real values
_Counted = TypeVar("_Counted", "np.int64", "np.float64")


def bucketed_counts(
    loaded: Loaded,
    count: Callable[[Loaded], npt.NDArray[_Counted]],
    n_buckets: int,
    step: Callable[[str], None] | None = None,
    what: str = "counting",
    *,
    columns: Sequence[str] | None = None,
    spill_dir: str | os.PathLike[str] | None = None,
) -> npt.NDArray[_Counted]:
    """Sum of ``count(bucket)`` over the user buckets (one progress step per bucket).

    On DuckDB with ``n_buckets > 1`` the input is partitioned once into a spill directory
    (``spill_dir``, default :func:`default_spill_parent`) that is removed afterwards;
    ``columns`` names the input columns ``count`` needs (default: all). An input parsed into
    user parts at its validation (:class:`UserParts`) is read from them instead, in the least
    power of two of buckets at least ``n_buckets``.
    """
    if n_buckets <= 1:
        return count(loaded)
    eng = root(loaded).engine
    total: npt.NDArray[_Counted] | None = None
    parsed = root(loaded).parts
    from_parts = parsed.buckets(n_buckets) if parsed is not None else None
    with ExitStack() as stack:
        parts: Iterator[Loaded]
        if parsed is not None and from_parts is not None:  # parsed into user parts already
            n_buckets, parts = from_parts, parted_buckets(loaded, parsed, from_parts)
        elif not eng.dialect.manages_own_memory and hasattr(eng, "con"):
            directory = stack.enter_context(spill_directory(spill_dir or default_spill_parent(eng)))
            if step is not None:
                step(f"{what}: writing {n_buckets} user buckets")
            parts = spilled_buckets(loaded, n_buckets, directory, columns)
        else:  # engines that spill by themselves: filtered views
            parts = user_buckets(loaded, n_buckets)
        stored = getattr(eng, "stored", None)  # tables a bucket stores (its tile lookup)
        for i in range(n_buckets):
            kept = len(stored) if stored is not None else 0
            part = next(parts)  # a bucket's relation (a tile lookup made here or when read)
            if step is not None:
                step(f"{what}: user bucket {i + 1}/{n_buckets}")
            c = count(part)
            total = c if total is None else total + c
            if stored is not None:  # nothing reads a counted bucket again
                eng.drop_stored(kept)  # type: ignore[attr-defined]
        for _ in parts:  # each bucket yielded exactly once: the generators end (and clean up)
            raise AssertionError("more user buckets than planned")
    assert total is not None
    return total


def counts_by_user_buckets(
    loaded: Loaded,
    count: Callable[[Loaded], npt.NDArray[_Counted]],
    what: str,
    *,
    buckets: int | None = None,
    step: Callable[[str], None] | None = None,
    columns: Sequence[str] | None = None,
    bytes_per_row: float | None = None,
) -> npt.NDArray[_Counted]:
    """:func:`bucketed_counts` with ``buckets`` buckets, by default as many as the engine's
    memory limit needs for ``bytes_per_row`` (:func:`plan_buckets`; 1 without a limit)."""
    limit = getattr(loaded.engine, "memory_limit", None)
    n = buckets or plan_buckets(loaded, limit, bytes_per_row)
    return bucketed_counts(loaded, count, n, step, what, columns=columns)
