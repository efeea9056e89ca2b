"""The Spark engine: the same pipeline SQL on PySpark (local mode or a cluster).

Select it with ``engine="spark"`` (Python) or ``--engine spark`` (CLI). Every pipeline query is
the SQL text the DuckDB engine runs; the differing functions come from
:data:`privmob.engine.dialect.SPARK`. A handful of DuckDB spellings used by the input loaders
(``read_parquet``, ``VARCHAR``, ``arg_min``, ``regexp_matches``, ``timezone(tz, ts)``, ...) are
rewritten to their Spark SQL equivalents by :func:`to_spark_sql` (or defined as Spark SQL
functions when the session starts), so one definition serves both engines.

Where Spark runs: ``master`` (default ``$PRIVMOB_SPARK_MASTER`` or ``local[*]``) and any Spark
configuration in ``conf`` (or ``$PRIVMOB_SPARK_CONF`` as ``key=value;key=value``). An existing
``SparkSession`` can be passed as ``session`` (it is borrowed: :meth:`SparkEngine.close`
stops only a session the engine started itself). Inputs are read where Spark can read them
(local paths, ``hdfs://``, ``s3a://``, ...). Sessions run in UTC with TIMESTAMP meaning a naive
(wall-clock) timestamp, as in the DuckDB engine. See docs/scale.md.

Privacy: the engine only computes exact bounded counts; bounding keeps at most M units per user
chosen by ``xxhash64`` of (fresh secret key, uid, unit id), a per-user choice that depends only
on the user's own records and the key, exactly as on DuckDB (the hash function differs, so
engines agree on aggregates whenever the bounds truncate nothing).
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pandas as pd

from privmob.engine.base import CsvFormat
from privmob.engine.dialect import SPARK, Dialect
from privmob.errors import EngineError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.timestampType": "TIMESTAMP_NTZ",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.shuffle.partitions": "8",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC -Dlog4j2.configurationFile="
    + (Path(__file__).with_name("log4j2.properties").as_uri()),
}

_READ_PARQUET = re.compile(r"read_parquet\('((?:[^']|'')*)'\)")
# DuckDB spellings in shared SQL -> Spark SQL (applied to every query text)
_REWRITES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bAS\s+VARCHAR\b", re.IGNORECASE), "AS STRING"),
    (re.compile(r"\bAS\s+TIMESTAMPTZ\b", re.IGNORECASE), "AS TIMESTAMP_LTZ"),
    (re.compile(r"\bAS\s+TIMESTAMP\s+WITH\s+TIME\s+ZONE\b", re.IGNORECASE), "AS TIMESTAMP_LTZ"),
    (re.compile(r"\barg_min\(", re.IGNORECASE), "min_by("),
    (re.compile(r"\barg_max\(", re.IGNORECASE), "max_by("),
    (re.compile(r"\bregexp_matches\(", re.IGNORECASE), "regexp_like("),
    (re.compile(r"\bto_timestamp\(", re.IGNORECASE), "timestamp_seconds("),
    (
        re.compile(r"\brow_number\(\)\s+OVER\s+\(\)", re.IGNORECASE),
        "row_number() OVER (ORDER BY monotonically_increasing_id())",
    ),
    (re.compile(r"SELECT \* EXCLUDE \([^)]*\)"), "SELECT *"),
]
_QUOTED = re.compile(r"'(?:[^']|'')*'|\"((?:[^\"]|\"\")*)\"")

# SQL functions DuckDB has and Spark lacks, defined once per session
# (timezone: from_utc_timestamp(ts, 'UTC') is ts, so for the zone 'UTC', a literal the
# optimizer folds, one zone conversion per row instead of two: parsing UTC instants costs half)
_FUNCTIONS = [
    "CREATE OR REPLACE TEMPORARY FUNCTION timezone(tz STRING, ts TIMESTAMP_LTZ) "
    "RETURNS TIMESTAMP_NTZ RETURN CASE WHEN tz = 'UTC' THEN CAST(ts AS TIMESTAMP_NTZ) "
    "ELSE CAST(from_utc_timestamp(ts, tz) AS TIMESTAMP_NTZ) END",
]

# Spark type names -> the DuckDB names the loaders test for
_TYPES = {
    "int": "INTEGER",
    "bigint": "BIGINT",
    "smallint": "SMALLINT",
    "tinyint": "TINYINT",
    "double": "DOUBLE",
    "float": "FLOAT",
    "string": "VARCHAR",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamp": "TIMESTAMP WITH TIME ZONE",
    "timestamp_ntz": "TIMESTAMP",
}


def to_spark_sql(sql: str) -> str:
    """Rewrite the few DuckDB spellings of privmob's shared SQL into Spark SQL."""
    sql = _READ_PARQUET.sub(lambda m: "parquet.`" + m.group(1).replace("''", "'") + "`", sql)
    for pattern, repl in _REWRITES:
        sql = pattern.sub(repl, sql)
    # "identifier" (DuckDB, standard SQL) -> `identifier` (Spark); in string literals a
    # backslash stays a backslash (regular expressions such as \s mean the same on both)
    return _QUOTED.sub(_backquote, sql)


def _backquote(m: re.Match[str]) -> str:
    if m.group(1) is None:  # a string literal: backslashes are plain characters (as in
        return m.group(0).replace("\\", "\\\\")  # DuckDB), Spark's parser unescapes them
    return "`" + m.group(1).replace('""', '"').replace("`", "``") + "`"


def _env_conf() -> dict[str, str]:
    text = os.environ.get("PRIVMOB_SPARK_CONF", "")
    pairs = [p.split("=", 1) for p in text.split(";") if "=" in p]
    return {k.strip(): v.strip() for k, v in pairs}


def spark_session(
    master: str | None = None, conf: dict[str, str] | None = None, app_name: str = "privmob"
) -> SparkSession:
    """Get or create a SparkSession with privmob's settings (UTC, naive timestamps)."""
    # pyspark warns that it has not been tested with pandas >= 3; privmob's Spark tests cover
    # the paths it uses, so the warning only clutters the command line
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark(\..*)?")
    # a failed query also prints the JVM stack as a warning when results come back via Arrow;
    # the error itself is raised (SparkQueryError) and shown as one line by the CLI
    warnings.filterwarnings("ignore", category=UserWarning, module=r"pyspark\.sql\.pandas\..*")
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - depends on the installation
        from privmob.extras import install_hint

        raise EngineError(
            "PySpark is not installed", hint=install_hint("spark") + "; it also needs Java 17"
        ) from exc
    builder = SparkSession.builder.master(
        master or os.environ.get("PRIVMOB_SPARK_MASTER", "local[*]")
    ).appName(app_name)
    for key, value in {**DEFAULT_CONF, **_env_conf(), **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    # errors reach the caller as exceptions; the executors' log would print JVM stacks
    session.sparkContext.setLogLevel("OFF")
    return session


class SparkEngine:
    """Runs privmob's pipeline SQL on a SparkSession (local mode or a cluster)."""

    name = "spark"
    dialect: Dialect = SPARK

    def __init__(
        self,
        *,
        session: SparkSession | None = None,
        master: str | None = None,
        conf: dict[str, str] | None = None,
        memory_limit: str | None = None,
    ) -> None:
        conf = dict(conf or {})
        if memory_limit:  # applies only when this call starts the driver
            conf.setdefault("spark.driver.memory", memory_limit.replace("B", "").lower())
        # a SparkContext this engine starts is its own: close() stops it, which ends the
        # application, so that a cluster's workers remove its executors' shuffle, spill and
        # cache files then, not when the Python process exits; a session passed in, or one
        # already running in this process (spark-submit, a notebook), is only borrowed
        self._owns = session is None and not _context_running()
        self.spark = session if session is not None else spark_session(master, conf)
        for statement in _FUNCTIONS:
            self.spark.sql(statement)
        self._cached: list[DataFrame] = []

    def _df(self, sql: str) -> DataFrame:
        return self.spark.sql(to_spark_sql(sql))

    def register(self, name: str, data: object) -> None:
        if isinstance(data, str | Path):
            self.read_parquet(name, str(data))
            return
        if hasattr(data, "to_pandas") and not isinstance(data, pd.DataFrame):
            data = data.to_pandas()  # Arrow table or Polars frame
        frame = cast(pd.DataFrame, data)  # a pandas frame now (what Engine.register takes)
        df = self.spark.createDataFrame(frame) if len(frame) else _empty(self.spark, frame)
        df.createOrReplaceTempView(name)

    def read_parquet(self, name: str, path: str) -> None:
        """A Parquet file or folder: a local path or any URL Spark reads (hdfs://, s3a://)."""
        self.spark.read.parquet(path).createOrReplaceTempView(name)

    def read_csv(self, name: str, path: str | list[str], fmt: CsvFormat = CsvFormat()) -> None:
        """A CSV file (gzip by its .gz name) as text columns, read as the DuckDB engine reads
        it: RFC 4180 quoting (a quote inside a field is doubled), empty fields are NULL, a row
        with a different number of fields is an error, the delimiter is detected from the
        first line unless given, columns of a file without header are ``column0, ...``."""
        first = path if isinstance(path, str) else path[0]
        sep = fmt.delimiter or sniff_delimiter(self._first_line(first))
        reader = self.spark.read.options(
            header="true" if fmt.header else "false",
            sep=sep,
            quote='"',
            escape='"',
            inferSchema="false",
            mode="FAILFAST",
        )
        df = reader.csv(path)
        given = list(fmt.names or [])
        renamed = [  # header names without surrounding spaces, as DuckDB reads them
            given[i] if i < len(given) else (c.strip() if fmt.header else f"column{i}")
            for i, c in enumerate(df.columns)
        ]
        if renamed != df.columns:
            df = df.toDF(*renamed)
        if fmt.filename_column:  # each row's file (its path as a URI)
            from pyspark.sql import functions as F

            df = df.withColumn(fmt.filename_column, F.input_file_name())
        df.createOrReplaceTempView(name)

    def _first_line(self, path: str) -> str:
        rows = self.spark.read.text(path).limit(1).collect()
        return str(rows[0][0]) if rows else ""

    def create_view(self, name: str, sql: str) -> None:
        self._df(sql).createOrReplaceTempView(name)

    def materialize(self, name: str, sql: str) -> None:
        """Compute ``sql`` once, now, into Spark's cache (memory, spilling to Spark's local dir),
        and expose it as ``name``. Computed eagerly, in a job of its own, so that the queries
        reading it only read the cache and a failure is reported here, as one line; unpersisted
        by :meth:`close`."""
        from pyspark import StorageLevel

        df = self._df(sql)
        try:
            df = df.persist(StorageLevel.MEMORY_AND_DISK)
            self._cached.append(df)
            df.count()
        except Exception as exc:  # as dense_counts: one line, nothing charged yet
            raise EngineError(
                f"the spark engine failed while computing {name}: {spark_error_message(exc)}",
                hint="check that the input files are unchanged and readable; for memory errors "
                "give Spark more memory (--spark-conf spark.driver.memory=8g in local mode)",
            ) from exc
        df.createOrReplaceTempView(name)

    def append(self, name: str, sql: str) -> None:
        """A new cached table: the rows of ``name`` and those of ``sql`` (the old cache is
        unpersisted at :meth:`close` with the others)."""
        self.materialize(name, f"SELECT * FROM {name} UNION ALL {sql}")

    def cache_once(self, name: str, sql: str) -> str:
        """Expose ``sql`` as ``name``, kept in Spark's cache (memory, spilling to Spark's local
        dirs: in local mode this run's private directory, see :func:`privmob.engine.open_engine`)
        once the first query reading ``name`` has computed it: that query (the validation pass)
        reads the input, and every later one reads the cache. Unpersisted by :meth:`close`."""
        from pyspark import StorageLevel

        df = self._df(sql).persist(StorageLevel.MEMORY_AND_DISK)
        self._cached.append(df)
        df.createOrReplaceTempView(name)
        return name

    def fetch(self, sql: str) -> pd.DataFrame:
        stripped = sql.lstrip()
        try:
            if stripped[:9].upper() == "DESCRIBE ":
                return self._describe(stripped[9:])
            frame: pd.DataFrame = self._df(sql).toPandas()
            return frame
        except Exception as exc:  # Py4J wraps the JVM's error: keep its innermost message
            raise SparkQueryError(spark_error_message(exc)) from exc

    def _describe(self, query: str) -> pd.DataFrame:
        fields = self._df(query).schema.fields
        return pd.DataFrame(
            {
                "column_name": [f.name for f in fields],
                "column_type": [
                    _TYPES.get(f.dataType.simpleString(), f.dataType.simpleString().upper())
                    for f in fields
                ],
            }
        )

    def columns(self, name: str) -> list[str]:
        return list(self.spark.table(name).columns)

    def close(self) -> None:
        """Drop cached tables; stop the session if this engine started it (a borrowed one
        stays: it may be shared).

        If the shared session was already stopped elsewhere, its caches are gone with it and
        there is nothing left to drop.
        """
        cached, self._cached = self._cached, []
        if self.spark.sparkContext._jsc is None:  # the SparkContext was stopped
            return
        for df in cached:  # blocking: no cached block of the input is left on disk after
            df.unpersist(blocking=True)  # close
        if self._owns:  # the application ends: its executors' files are removed
            self._owns = False
            self.spark.stop()

    def __enter__(self) -> SparkEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _context_running() -> bool:
    """Whether this process already runs a SparkContext (which getOrCreate would reuse)."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


class SparkQueryError(RuntimeError):
    """A Spark query failed; the message is the JVM's innermost cause, on one line."""


def spark_error_message(exc: BaseException) -> str:
    """The most specific line of a Spark error (the last ``Caused by``), without SQLSTATE."""
    text = str(exc)
    causes = re.findall(r"Caused by: [\w.$]+: (.+)", text)
    line = causes[-1] if causes else (text.strip().splitlines() or [type(exc).__name__])[0]
    return re.sub(r"\s*SQLSTATE: \w+\s*$", "", line.strip())


def sniff_delimiter(line: str) -> str:
    """The most frequent of ``, ; tab |`` outside quoted fields of ``line`` (default ``,``)."""
    unquoted = re.sub(r'"(?:[^"]|"")*"', "", line)
    counts = {d: unquoted.count(d) for d in (",", ";", "\t", "|")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


def _empty(spark: SparkSession, frame: pd.DataFrame) -> DataFrame:
    """An empty Spark DataFrame with the pandas frame's columns (types from Arrow)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = from_arrow_schema(pa.Schema.from_pandas(frame, preserve_index=False))
    return spark.createDataFrame([], schema)
