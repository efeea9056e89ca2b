"""The Spark engine's text rewrites and helpers (pure functions: no Java needed)."""

from __future__ import annotations

import pytest

from privmob.data.reading import is_url
from privmob.engine.spark import sniff_delimiter, spark_error_message, to_spark_sql


def test_backslashes_in_literals_stay_backslashes() -> None:
    """Spark's parser unescapes '\\s' to 's'; DuckDB keeps it. The rewrite doubles it so a
    regular expression means the same on both engines (it did not before: offsets written
    after a space were silently dropped on Spark)."""
    sql = "SELECT regexp_matches(\"t\", '[0-9]\\s+[A-Z]') FROM x WHERE \"a\\b\" = 'it''s'"
    assert to_spark_sql(sql) == (
        "SELECT regexp_like(`t`, '[0-9]\\\\s+[A-Z]') FROM x WHERE `a\\b` = 'it''s'"
    )


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("uid,datetime,lat,lng", ","),
        ("uid;datetime;lat;lng", ";"),
        ("uid\tdatetime\tlat", "\t"),
        ("uid|datetime|lat", "|"),
        ('"a,b";c;d', ";"),  # the comma is inside quotes
        ("uid", ","),
        ("", ","),
    ],
)
def test_sniff_delimiter(line: str, expected: str) -> None:
    assert sniff_delimiter(line) == expected


def test_spark_error_message_is_the_innermost_cause() -> None:
    text = (
        "An error occurred while calling o296.getResult.\n"
        ": org.apache.spark.SparkException: Exception thrown in awaitResult:\n"
        "\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:70)\n"
        "Caused by: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered "
        "error while reading file file:///x.csv.  SQLSTATE: KD001\n"
        "Caused by: org.apache.spark.SparkRuntimeException: [MALFORMED_CSV_RECORD] Malformed "
        "CSV record: a,b,c SQLSTATE: KD000\n\tat org.apache.spark.sql.X(X.scala:1)\n"
    )
    assert spark_error_message(RuntimeError(text)) == (
        "[MALFORMED_CSV_RECORD] Malformed CSV record: a,b,c"
    )
    assert spark_error_message(ValueError("one line")) == "one line"


def test_urls_are_left_to_the_engine() -> None:
    assert is_url("s3a://bucket/events/") and is_url("hdfs://nn:8020/x.csv")
    assert is_url("file:///tmp/x.parquet")
    assert not is_url("/tmp/x.csv") and not is_url("C:/data/x.csv") and not is_url("x.csv")
