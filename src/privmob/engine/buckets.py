"""Out-of-core counting: split the users into hash buckets sized to the memory limit.

DuckDB's window step (per-user bounding, trips from events) holds a whole partition set in
memory. To run on inputs larger than memory, the users are split into ``B`` buckets by a hash of
the user id; each bucket is a filtered view of the input, bounded and counted on its own, and
the dense bucket counts are summed. Every user falls in exactly one bucket, so per-user bounding
(and building trips from a user's events) is exact within a bucket and the sum equals the
single-pass result: privacy semantics are unchanged. The bucket hash is not secret (it only
partitions work); the bounding hash keeps its own fresh key per bucket.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

from privmob.data.sources import Loaded, _new_name
from privmob.errors import ConfigError

#: Bytes of engine memory one input row needs in the window steps (measured ~100 on DuckDB
#: 1.x for events/trips; doubled for headroom).
BYTES_PER_ROW = 200
#: Fraction of the memory limit one bucket may use.
BUCKET_SHARE = 0.5

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
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def bucket_predicate(dialect_name: str, n_buckets: int, bucket: int, user: str = "uid") -> str:
    """SQL true for the users of one bucket (a plain, unkeyed hash of the user id)."""
    if dialect_name == "spark":
        return f"pmod(xxhash64({user}), {n_buckets}) = {bucket}"
    return f"hash({user}) % {n_buckets} = {bucket}"


def source_rows(loaded: Loaded) -> int:
    """Rows of the input: Parquet metadata when the source is a Parquet path, else a count."""
    eng = loaded.engine
    path = Path(loaded.source)
    if eng.name == "duckdb" and path.suffix.lower() in {".parquet", ".pq"} and path.exists():
        sql = f"SELECT count(*) AS n FROM read_parquet('{str(path).replace(chr(39), '')}')"
    elif eng.name == "duckdb" and path.is_dir():
        sql = f"SELECT count(*) AS n FROM read_parquet('{path}/*.parquet')"
    else:
        sql = f"SELECT count(*) AS n FROM {loaded.view}"
    return int(eng.fetch(sql)["n"].iloc[0])


def plan_buckets(loaded: Loaded, memory_limit: str | int | None) -> int:
    """How many user buckets keep one bucket's window work within the memory limit."""
    if memory_limit is None or loaded.engine.name != "duckdb":
        return 1  # no limit given, or an engine that spills by itself (Spark)
    limit = parse_memory(memory_limit) if isinstance(memory_limit, str) else int(memory_limit)
    need = source_rows(loaded) * BYTES_PER_ROW
    return max(1, math.ceil(need / (limit * BUCKET_SHARE)))


def user_buckets(loaded: Loaded, n_buckets: int) -> Iterator[Loaded]:
    """The input split into ``n_buckets`` disjoint views by a hash of the user id."""
    if n_buckets <= 1:
        yield loaded
        return
    for b in range(n_buckets):
        yield one_bucket(loaded, n_buckets, b)


def one_bucket(loaded: Loaded, n_buckets: int, bucket: int) -> Loaded:
    """The users of one bucket. Derived relations (trips from events, from trip points) are
    rebuilt from the bucketed input, since engines do not push a filter below a window."""
    if loaded.base is not None and loaded.derive is not None:
        return loaded.derive(one_bucket(loaded.base, n_buckets, bucket))
    view = _new_name("bucket")
    pred = bucket_predicate(loaded.engine.dialect.name, n_buckets, bucket)
    loaded.engine.create_view(view, f"SELECT * FROM {loaded.view} WHERE {pred}")
    return replace(loaded, view=view)


def bucketed_counts(
    loaded: Loaded,
    count: Callable[[Loaded], np.ndarray],
    n_buckets: int,
    step: Callable[[str], None] | None = None,
    what: str = "counting",
) -> np.ndarray:
    """Sum of ``count(bucket)`` over the user buckets (one progress step per bucket)."""
    total: np.ndarray | None = None
    for i, part in enumerate(user_buckets(loaded, n_buckets)):
        if step is not None and n_buckets > 1:
            step(f"{what}: user bucket {i + 1}/{n_buckets}")
        c = count(part)
        total = c if total is None else total + c
    assert total is not None
    return total
