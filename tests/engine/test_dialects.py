"""Every difference between the engines is their dialect's (issue 41): code outside the
engine's construction asks the engine's :class:`~privmob.engine.dialect.Dialect` what to do,
never which engine it runs on."""

from __future__ import annotations

import re
from pathlib import Path

import privmob
from privmob.engine.dialect import DUCKDB, SPARK, Dialect, DuckDBDialect, SparkDialect

SRC = Path(privmob.__file__).parent
#: ``engine.name == "spark"``, ``dialect.name != "duckdb"``, ``name in ("duckdb", ...``
NAME_CHECK = re.compile(r"""\bname\s*(==|!=|(not\s+)?in\s*[(\[{])\s*["'](duckdb|spark)["']""")
#: where the engine is chosen by the name the user gave
CONSTRUCTION = {Path("engine/__init__.py")}


def test_no_code_outside_the_engine_choice_asks_which_engine_it_runs_on() -> None:
    found = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC) not in CONSTRUCTION
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if NAME_CHECK.search(line)
    ]
    assert found == []


def test_each_engine_has_a_dialect_of_its_own() -> None:
    assert isinstance(DUCKDB, DuckDBDialect) and isinstance(SPARK, SparkDialect)
    assert {DUCKDB.name, SPARK.name} == {"duckdb", "spark"}
    assert all(isinstance(d, Dialect) for d in (DUCKDB, SPARK))
