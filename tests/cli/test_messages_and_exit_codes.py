"""What the command prints when something goes wrong: one literal message (never a record),
a distinct exit code per kind of failure, a private report instead of a traceback."""

import os
import stat

import pytest
from tests.helpers import box_grid, od_argv

from privmob import __version__
from privmob.cli import main
from privmob.cli.failure import VERBOSE, run
from privmob.errors import EXIT_INTERNAL


def _main(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return int(exc.value.code or 0)


@pytest.fixture
def grid_file(tmp_path):
    path = tmp_path / "grid.geojson"
    box_grid(3).gdf.to_file(path, driver="GeoJSON")
    return path


def _od(data, grid_file, tmp_path, *extra: str) -> list[str]:
    return [
        *extra,
        *od_argv(
            data, grid_file, "--ledger", str(tmp_path / "l.sqlite"), "-o", str(tmp_path / "out"),
            "--input-shape", "trip-points", "--quiet", epsilon=1, max_trips=1, budget=5,
        ),
    ]  # fmt: skip


def test_version(capsys):
    assert _main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"privmob {__version__}"


def test_error_text_is_printed_literally(tmp_path, grid_file, capsys):
    """Rich markup used to eat bracketed text: 'nofile[x].parquet' printed as 'nofile.parquet'."""
    missing = tmp_path / "nofile[x].parquet"
    assert _main(_od(missing, grid_file, tmp_path)) == 2
    err = capsys.readouterr().err
    assert "nofile[x].parquet: file not found" in err and "Traceback" not in err


def test_bad_record_message_has_no_record_and_counts_only_when_verbose(tmp_path, grid_file, capsys):
    data = tmp_path / "points.csv"
    data.write_text(
        "uid,tid,datetime,lat,lng\nalice,1,2024-01-01 08:00,52.005,13.005\n"
        "bob77,2,2024-01-01 09:00,95.123,13.015\n"
    )
    assert _main(_od(data, grid_file, tmp_path)) == 2
    err = capsys.readouterr().err
    assert "column 'lat', row 2: missing, NaN or out-of-range latitude" in err
    assert not [v for v in ("alice", "bob77", "95.123", "13.015", "09:00") if v in err], err
    assert "1 of 2 rows" not in err and "--verbose" in err
    try:
        assert _main(_od(data, grid_file, tmp_path, "--verbose")) == 2
        assert "1 of 2 rows" in capsys.readouterr().err
        VERBOSE["on"] = False
        assert _main([*_od(data, grid_file, tmp_path), "--verbose"]) == 2  # after the command
        assert "1 of 2 rows" in capsys.readouterr().err
    finally:
        VERBOSE["on"] = False


def test_internal_error_exits_1_with_a_private_report(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR

    def broken(args, standalone_mode):
        raise RuntimeError("secret record uid=42 at 52.5,13.4")

    with pytest.raises(SystemExit) as exc:
        run(broken, [])
    assert exc.value.code == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "Traceback" not in err and "uid=42" not in err and "internal error" in err
    (report,) = tmp_path.glob("privmob-error-*.txt")
    assert str(report) in err
    assert stat.S_IMODE(os.stat(report).st_mode) == 0o600
    text = report.read_text()
    assert "Traceback" in text and "RuntimeError" in text and __version__ in text
