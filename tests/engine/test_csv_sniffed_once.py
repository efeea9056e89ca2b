"""A CSV's dialect and columns are detected once per run: the raw view reads with the fixed
reader DuckDB proposes (``sniff_csv``), which must read exactly what the detecting reader
reads, on every dialect users bring."""

import gzip

import duckdb
import pytest

from privmob.engine import DuckDBEngine
from privmob.engine.base import CsvFormat
from privmob.engine.duckdb import FIXED_READER, _version

ROWS = [("7", "2024-01-01 08:00:00+01", "a"), ("007", "2024-01-01T09:30:00Z", "b c")]
ROWS += [("9", "2024-01-02 10:00:00", 'q "r", s; t| u\tv')]  # quoted: every delimiter, quotes


def _write(path, sep, quote_all=False, header=True, gz=False):
    lines = [sep.join(["uid", "datetime", "name"])] if header else []
    for row in ROWS * 40:
        quoted = [quote_all or any(ch in c for ch in ',;|\t"') for c in row]
        cells = [
            '"' + c.replace('"', '""') + '"' if q else c for c, q in zip(row, quoted, strict=True)
        ]
        lines.append(sep.join(cells))
    text = "\n".join(lines) + "\n"
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize(
    "name,sep,quote_all,header,gz",
    [
        ("comma.csv", ",", False, True, False),
        ("semicolon.csv", ";", True, True, False),
        ("tab.tsv", "\t", False, True, False),
        ("pipe.csv", "|", True, True, False),
        ("noheader.csv", ",", False, False, False),
        ("zipped.csv.gz", ",", True, True, True),
    ],
)
def test_the_fixed_reader_reads_what_detection_reads(tmp_path, name, sep, quote_all, header, gz):
    path = _write(tmp_path / name, sep, quote_all, header, gz)
    names = None if header else ("uid", "datetime", "name")
    with DuckDBEngine() as eng:
        eng.read_csv("raw", str(path), CsvFormat(header=header, names=names))
        view = eng.fetch("SELECT sql FROM duckdb_views() WHERE view_name = 'raw'")["sql"][0]
        if FIXED_READER:  # detected once, then read with fixed options
            assert "auto_detect = false" in view.replace("(", "").replace(")", "")
        got = eng.fetch("SELECT * FROM raw")
    opts = f"header = {str(header).lower()}, all_varchar = true"
    if names:
        opts += ", names = ['uid', 'datetime', 'name']"
    want = duckdb.sql(f"SELECT * FROM read_csv('{path}', {opts})").df()
    assert list(got.columns) == list(want.columns) == ["uid", "datetime", "name"]
    assert got.equals(want) and got["uid"].tolist()[:2] == ["7", "007"]  # text kept as written
    assert got["name"].tolist()[2] == 'q "r", s; t| u\tv'


def test_the_version_gate():
    assert _version("1.1.3") < (1, 2) <= _version("1.2.0") < _version("2.0.0.dev7")
    assert _version("unknown") == (0, 0)


def test_several_files_keep_the_detecting_reader(tmp_path):
    a = _write(tmp_path / "a.csv", ",")
    b = _write(tmp_path / "b.csv", ",")
    with DuckDBEngine() as eng:
        eng.read_csv("raw", [str(a), str(b)])
        assert int(eng.fetch("SELECT count(*) AS n FROM raw")["n"][0]) == 2 * 120
