"""Issue 39: a full disk under the ledger is a full disk, not "ledger damaged ... restore it from
a backup" (following that hint is a rollback). A real full file system: a small tmpfs mounted in
a private mount namespace (``unshare``), the ledger copied onto it, the rest filled with ``dd``;
privmob runs there as a real process. Skipped where no mount namespace can be made."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers import box_grid, random_trips

from privmob.privacy.costs import Cost
from privmob.privacy.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
set -u
mount -t tmpfs -o size=4m tmpfs "$DISK"
cp "$LEDGER" "$DISK/ledger.sqlite"
dd if=/dev/zero of="$DISK/fill" bs=4k 2>/dev/null || true
run() {  # name, then privmob's arguments: its exit status and both streams in $OUT/name.*
    name=$1; shift
    "$PY" -m privmob "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
    echo $? > "$OUT/$name.code"
}
run init ledger init more --epsilon 1 --make-key --ledger "$DISK/ledger.sqlite"
run od od "$DATA/trips.parquet" -t "$DATA/grid.geojson" -e 0.5 -T 2 \
    --ledger "$DISK/ledger.sqlite" -o "$OUT/release" --quiet
rm "$DISK/fill"
run verify ledger verify --ledger "$DISK/ledger.sqlite"
"$PY" -c "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(
    'SELECT count(*) FROM releases').fetchone()[0])" "$DISK/ledger.sqlite" > "$OUT/entries"
"""


def _namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs tmpfs /mnt 2>/dev/null || exit 1"],
        capture_output=True,
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _namespaces(), reason="no private mount namespace (unshare -rm) here")
def test_a_full_disk_is_reported_as_a_full_disk(tmp_path):
    random_trips(20, 9, seed=3).to_parquet(tmp_path / "trips.parquet")
    box_grid(3).gdf.to_file(tmp_path / "grid.geojson", driver="GeoJSON")
    led = Ledger(tmp_path / "ledger.sqlite")
    led.set_budget("trips", 6.0)
    led.charge("trips", Cost.pure(1.0), kind="od")
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    env = {
        "DISK": str(disk),
        "OUT": str(out),
        "DATA": str(tmp_path),
        "LEDGER": str(tmp_path / "ledger.sqlite"),
        "PY": sys.executable,
        "COLUMNS": "250",
    }
    import os

    subprocess.run(
        ["unshare", "-rm", "sh", "-c", SCRIPT],
        env={**os.environ, **env},
        cwd=ROOT,
        check=True,
        timeout=300,
    )
    for name in ("init", "od"):
        err = " ".join((out / f"{name}.err").read_text().split())
        assert (out / f"{name}.code").read_text().strip() == "3", err
        assert "is full" in err, err
        assert "ledger damaged" not in err and "restore it from a backup" not in err, err
        assert "internal" not in err and "Traceback" not in err, err
    assert not (out / "release").exists()
    assert (out / "verify.code").read_text().strip() == "0", (out / "verify.err").read_text()
    assert (out / "entries").read_text().strip() == "1"  # nothing was charged
