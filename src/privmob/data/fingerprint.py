"""The content fingerprint of an input: what binds a release's input to one dataset in the
ledger (:func:`privmob.privacy.ledger.checks.refuse_foreign_input`), computed in the
validation pass (:func:`privmob.data.validation.validate`) on canonical values, so that the
same content gets the same fingerprint on DuckDB and Spark, from CSV or Parquet, in any row
order, whatever the file's and the columns' names.

**Definition (v3, ``privmob-input-v3``).** A row's canonical values are its ids as canonical
id text (:func:`identity_text`: an integral number is its integer's text whatever its type, so
``7``, ``7.0`` and the text ``"7.0"`` are one id), its times as whole microseconds since 1970
(:func:`time_text`) and its coordinates as whole 1e-7 degrees rounded down
(:func:`coordinate_text`); times and coordinates are the row's *canonical integers*. The
fingerprint is SHA-256 of the version, the canonical names, and three aggregates over the
input:

1. the exact row count (every row);
2. the exact sum of each canonical integer over every row (cheap integer sums);
3. the exact sum of the row hashes (:func:`row_hash`: the first 8 bytes of MD5 of the row's
   canonical text) over the **sampled rows** only: those whose canonical integers' remainders
   modulo :data:`SAMPLE_MODULUS` (17, a prime: it divides none of the steps real data is
   rounded to, seconds, minutes, days, 1e-5 degrees) sum to a multiple of 17
   (:func:`sample_selected`); about 1 row in 17 on whole-second times and rounded coordinates.
   A row without canonical integers (none in the input's shape, or all NULL) is always sampled.

It is tagged ``v3:`` in the ledger so that it is never mistaken for an older definition.

**Why a sample is safe.** The fingerprint exists to refuse the *same* input under a second
dataset name; equal fingerprints only ever refuse (under the dataset that holds them a release
is allowed whatever its fingerprint). Its possible errors are:

* a false "same" (two different inputs, one fingerprint): the second input is treated as an
  already-released dataset's and refused under another name; that only makes privmob more
  conservative, and the user can state ``--new-dataset-for-same-data`` (recorded);
* a false "different" for the same content: impossible, the definition (the sample included)
  is a deterministic function of canonical values, engine- and format-free (tested).

What changes the fingerprint: a row more or less (the count); any change of a time or a
coordinate in any row (the integer sums; a one-second shift of one row moves the time sum by
10^6); any change of a sampled row, an id included (its row hash); a shift of every time,
which also changes which rows are sampled. What it does not see: edits of ids in unsampled
rows, and edits of times or coordinates in unsampled rows that keep every column's sum
(values swapped between rows, changes that cancel). Such a near-copy gets the original's
fingerprint and is refused under a new name as the original's data: the residual of the
sample is precision (v2 told such near-copies apart), not privacy. Deliberate evasion, editing
records until the fingerprint differs, was never the fingerprint's defence (one shifted time
escapes v3, as one edited value escaped v2): the people sketch (:mod:`privmob.privacy.people`)
binds the users whatever the edit.

**One id whatever its column's type.** Before the canonical id text, an id was the engine's
text of its value: a float64 user id (``7.0``: what pandas writes for an integer column with a
missing value) was another id than the integer ``7``, so the same events with float ids got
another fingerprint and another people sketch, a second budget. The canonical id text changed
no id of an integer or a text column but a text of an integral number with a fraction of
zeros (``"7.0"``), so v3 is kept: every fingerprint of an input with integer or (other) text
ids is the same as before. An input with float or decimal ids (or ``"N.0"`` texts) fingerprinted
before the change has another v3 value now, and its stored people sketch holds the keyed hashes
of the older texts: the same people released again from such a dataset under a new name are not
recognised (a dataset family links them; docs/operations.md).

**Earlier definitions.** ``privmob-input-v2`` (untagged in the ledger) summed the row hash of
every row; it costs an MD5 per row (up to 63% of a population release at 10M rows). A ledger
that holds v2 entries of another dataset still refuses the same input: the release computes
the v2 fingerprint too (:func:`legacy_content_fingerprint`, one more pass) only where another
dataset holds a v2 entry of as many rows
(:meth:`privmob.privacy.ledger.Ledger.holds_older_fingerprints`), and the check looks for
both, never recording the v2 value.
"""

from __future__ import annotations

import hashlib
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from privmob.data.reading import INTEGER_TYPES, ident
from privmob.engine.base import Engine

#: the version of the fingerprint's definition (a new one never matches an older one)
FINGERPRINT_VERSION = "privmob-input-v3"
#: the prefix of a fingerprint of this version in the ledger (the older one had none)
FINGERPRINT_TAG = "v3:"
#: the definition before it: every row's hash summed, stored untagged
LEGACY_VERSION = "privmob-input-v2"

#: one coordinate unit of the canonical text: 1e-7 degree (about 1 cm)
COORDINATE_SCALE = 10_000_000
#: a row is sampled when its canonical integers' remainders modulo this prime sum to a
#: multiple of it (about 1 row in 17)
SAMPLE_MODULUS = 17


class Canonical(str):
    """The SQL text of a value's canonical text that also knows the SQL of the canonical
    integer (BIGINT) the text spells: a time's microseconds, a coordinate's 1e-7 degrees.
    Used as a plain ``str`` (its text) everywhere else."""

    integer: str | None

    def __new__(cls, text: str, integer: str | None = None) -> Canonical:
        made = super().__new__(cls, text)
        made.integer = integer
        return made


#: the column types whose values are numbers with a fraction (an integral one is an id)
FRACTIONAL_TYPES = ("DOUBLE", "FLOAT", "REAL", "DECIMAL", "NUMERIC")
#: the text of an integral number written with a fraction of zeros: its sign, its digits
#: without leading zeros (SQL regular expression, the same on DuckDB and Spark; ``[.]``, not
#: a backslash, which Spark's string literals would unescape)
_ZERO_FRACTION = "^(-?)0*([0-9]+)[.]0+$"
#: below this magnitude a float is converted to a BIGINT exactly (2^63)
_INT64_LIMIT = "9.223372036854775807E18"


def identity_text(col: str, column_type: str | None = None, *, table: str | None = None) -> str:
    """An identifier column as its *canonical id text*, so that one person (one trip, one cell)
    is one id whatever the column's type and the engine:

    * an integer: its decimal text (``7``, ``-3``);
    * a float or a decimal (``column_type`` one of :data:`FRACTIONAL_TYPES`) with an integral
      value below 2^63 in magnitude: the same integer's text (``7.0`` -> ``7``, ``-0.0`` ->
      ``0``); any other float (``7.5``, NaN, infinite) keeps the engine's text;
    * a text (or a value of any other type, as its text): as it is (``"007"``, ``" 7"`` and
      ``"u7"`` are ids of their own), except the
      decimal text of an integral number with a fraction of zeros, which is that integer's
      text (``"7.0"`` and ``"007.00"`` -> ``7``, ``"-0.0"`` -> ``0``): what DuckDB reads as a
      float from a CSV, Spark reads as text.

    An id is text: it is no canonical integer. :func:`canonical_id` is the reference.
    ``table``: the alias the column is read through (``e`` for ``e.cell_id``)."""
    c = ident(col) if table is None else f"{table}.{ident(col)}"
    kind = (column_type or "").upper()
    if kind.startswith(FRACTIONAL_TYPES):
        return (
            f"CASE WHEN {c} = floor({c}) AND abs({c}) < {_INT64_LIMIT} "
            f"THEN CAST(CAST({c} AS BIGINT) AS VARCHAR) ELSE CAST({c} AS VARCHAR) END"
        )
    text = f"CAST({c} AS VARCHAR)"
    if kind in INTEGER_TYPES:
        return text  # its decimal text, as before
    # any other type (VARCHAR, STRING, CHAR(n), an ENUM, unknown): the text rule, a no-op on
    # a text without a point (a UUID, a date, a boolean)
    # a text without a point is itself (one cheap test per row before the pattern)
    digits = f"regexp_extract({text}, '{_ZERO_FRACTION}', 2)"
    sign = f"regexp_extract({text}, '{_ZERO_FRACTION}', 1)"
    return (
        f"CASE WHEN instr({text}, '.') = 0 THEN {text} WHEN {digits} = '' THEN {text} "
        f"WHEN {digits} = '0' THEN '0' "
        f"ELSE concat({sign}, {digits}) END"
    )


def canonical_id(value: object) -> str:
    """The reference of :func:`identity_text`: a Python value's canonical id text (an int, a
    float or a ``Decimal``, a text)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, Decimal | numbers.Real):
        number = value if isinstance(value, Decimal) else Decimal(float(value))  # exact
        if number.is_finite() and number == int(number) and abs(number) < 2**63:
            return str(int(number))
        return str(value)
    text = str(value)
    matched = re.fullmatch(r"(-?)0*([0-9]+)[.]0+", text)
    if matched is None:
        return text
    sign, digits = matched.groups()
    return "0" if digits == "0" else sign + digits


def time_text(engine: Engine, expr: str, micros: str | None = None) -> Canonical:
    """A parsed time as canonical text: whole microseconds since 1970-01-01 (the wall clock
    the loader parsed it to), the same number on both engines. ``micros``: the SQL of that
    number where the loader reads it more cheaply than from ``expr``
    (:func:`privmob.data.times.canonical_time`)."""
    micros = micros or engine.dialect.epoch_micros(expr)
    return Canonical(f"CAST({micros} AS VARCHAR)", micros)


def coordinate_text(expr: str) -> Canonical:
    """A parsed coordinate (DOUBLE, degrees) as canonical text: the whole number of 1e-7
    degrees below it (``floor`` of an IEEE product: exact and the same on both engines,
    where the engines' own texts of a double differ). A value the checks refuse (NaN, out of
    range) gives NULL here, never an error: the same pass must reach the checks' message."""
    scaled = f"TRY_CAST(floor({expr} * CAST({COORDINATE_SCALE} AS DOUBLE)) AS BIGINT)"
    return Canonical(f"CAST({scaled} AS VARCHAR)", scaled)


def integers_of(content: Mapping[str, str]) -> list[str]:
    """The SQL of ``content``'s canonical integers, in its order."""
    return [v.integer for v in content.values() if isinstance(v, Canonical) and v.integer]


#: The column of a sampled row's MD5 digest in the relation Spark's fingerprint reads
#: (:func:`fingerprint_source`).
DIGEST_COLUMN = "pm_row_digest"


def fingerprint_source(engine: Engine, content: Mapping[str, str], relation: str) -> str:
    """What :func:`content_fingerprint` reads from (``SELECT ... FROM`` this): ``relation``,
    on Spark with each sampled row's MD5 digest computed once in a projection
    (:data:`DIGEST_COLUMN`, NULL for the other rows). Under the aggregate Spark wrote the
    digest once per hex byte it sums (8 times per sampled row); the statement of 10M trips on
    the standalone cluster took 2.09 s against 2.53 s, best of 6 (the same text)."""
    if not engine.dialect.digests_in_projection:
        return relation
    digest = f"CASE WHEN {sample_condition(content)} THEN md5({_row_text(content)}) END"
    return f"(SELECT *, {digest} AS {DIGEST_COLUMN} FROM {relation}) AS digested_"


def content_fingerprint(engine: Engine, content: Mapping[str, str]) -> str:
    """An aggregate SQL expression (text) of the input's content fingerprint (v3, see the
    module), for the validation pass, over :func:`fingerprint_source`: the exact sum of each
    canonical integer and the exact sum of the sampled rows' hashes, joined by ``/`` (an empty
    part for a sum over no value).

    ``content``: canonical name -> SQL text of the value in its canonical form
    (:func:`identity_text`, :func:`time_text`, :func:`coordinate_text`). The row hash is
    computed for sampled rows only (inside ``CASE``: DuckDB evaluates a ``CASE`` branch only
    for the rows that take it, where ``FILTER (WHERE ...)`` computes the argument of every row,
    measured in benchmarks/bench_fingerprint.py). Both engines compute the same text: the
    reference is :func:`reference_total`."""
    d = engine.dialect
    parts = [d.exact_sum_text(i) for i in integers_of(content)]
    if d.digests_in_projection:  # the sampled rows' digests, computed by fingerprint_source
        parts.append(d.row_hash_sum(_row_text(content), None, digest=DIGEST_COLUMN))
    else:
        parts.append(d.row_hash_sum(_row_text(content), sample_condition(content)))
    return f"concat_ws('/', {', '.join(f'coalesce({p}, {_EMPTY})' for p in parts)})"


_EMPTY = "''"


def sample_condition(content: Mapping[str, str]) -> str:
    """SQL true for a sampled row (:func:`sample_selected` is the reference): its canonical
    integers' remainders modulo :data:`SAMPLE_MODULUS` (NULL counting 0) sum to a multiple of
    it; true for every row of a content without canonical integers."""
    mix = " + ".join(f"coalesce({i} % {SAMPLE_MODULUS}, 0)" for i in integers_of(content))
    return f"({mix or '0'}) % {SAMPLE_MODULUS} = 0"


def _row_text(content: Mapping[str, str]) -> str:
    """SQL: a row's canonical text (:func:`row_hash` hashes it)."""
    return f"concat_ws('|', {', '.join(content.values())})"


def fingerprint_text(content: Mapping[str, str], n_rows: int, total: Any) -> str:
    """The fingerprint (v3): ``v3:`` and SHA-256 of the definition's version, the canonical
    names, the row count and the aggregates' text (:func:`content_fingerprint`). No engine
    name: the same input gets the same fingerprint on DuckDB and Spark. (A 64-bit row hash is
    an accident detector, not a defence against someone crafting a collision; deliberate
    evasion is the people sketch's and the roles' part, :mod:`privmob.privacy.people`.)"""
    text = f"{FINGERPRINT_VERSION}|{','.join(content)}|{n_rows}|{'' if total is None else total}"
    return FINGERPRINT_TAG + hashlib.sha256(text.encode()).hexdigest()


def is_legacy(fingerprint: str) -> bool:
    """Whether a stored fingerprint is of the untagged v2 definition."""
    return ":" not in fingerprint


# -- the reference (what both engines compute in SQL; the tests compare against it) ----------
def row_hash(values: Sequence[str]) -> int:
    """The reference of one row's hash: the first 8 bytes of MD5 of the canonical values
    joined by ``|``, as an unsigned little-endian integer."""
    digest = hashlib.md5("|".join(values).encode(), usedforsecurity=False).digest()
    return int.from_bytes(digest[:8], "little")


def _remainder(x: int) -> int:
    """SQL's ``x % m`` (the sign of ``x``, as DuckDB and Spark compute it)."""
    return x % SAMPLE_MODULUS if x >= 0 else -(-x % SAMPLE_MODULUS)


def sample_selected(integers: Sequence[int | None]) -> bool:
    """The reference of the sample: a row is sampled when its canonical integers' remainders
    modulo :data:`SAMPLE_MODULUS` (NULL counting 0) sum to a multiple of it."""
    return sum(0 if i is None else _remainder(i) for i in integers) % SAMPLE_MODULUS == 0


def reference_total(rows: Iterable[tuple[Sequence[str], Sequence[int | None]]]) -> str:
    """The reference of :func:`content_fingerprint`'s text over ``rows``, each a pair (the
    canonical texts, the canonical integers) in the content's order."""
    rows = list(rows)
    width = len(rows[0][1]) if rows else 0
    parts = []
    for j in range(width):
        values = [v for _, i in rows if (v := i[j]) is not None]
        parts.append(str(sum(values)) if values else "")
    sampled = [row_hash(t) for t, i in rows if sample_selected(i)]
    parts.append(str(sum(sampled)) if sampled else "")
    return "/".join(parts)


# -- v2, for ledgers that hold its fingerprints ----------------------------------------------
def legacy_content_fingerprint(engine: Engine, content: Mapping[str, str]) -> str:
    """The aggregate SQL expression of the v2 fingerprint: the sum of every row's hash."""
    return engine.dialect.row_hash_sum(_row_text(content), None)


def legacy_fingerprint_text(content: Mapping[str, str], n_rows: int, total: Any) -> str:
    """The v2 fingerprint (untagged): SHA-256 of v2's version, the names, rows and sum."""
    text = f"{LEGACY_VERSION}|{','.join(content)}|{n_rows}|{total}"
    return hashlib.sha256(text.encode()).hexdigest()


def legacy_fingerprint(
    engine: Engine, relation: str, content: Mapping[str, str], n_rows: int
) -> str:
    """The v2 fingerprint of ``relation`` (one more pass over it, hashing every row)."""
    expr = legacy_content_fingerprint(engine, content)
    total = engine.fetch(f"SELECT {expr} AS pm_fingerprint_v2 FROM {relation}").iloc[0, 0]
    return legacy_fingerprint_text(content, n_rows, total)
