"""The ``privmob`` script exits without the interpreter's teardown (``privmob.cli.entry``), and
loses nothing by it: the ``atexit`` handlers run, stdout and stderr are flushed, the exit status
is the command's, a running non-daemon thread is waited for. Real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import box_grid, random_trips


def child(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_atexit_handlers_run_and_buffered_output_is_flushed(tmp_path: Path) -> None:
    done = child(
        "import atexit, sys\n"
        "from pathlib import Path\n"
        "from privmob.cli.entry import quick_exit\n"
        "atexit.register(lambda: Path(sys.argv[1], 'cleaned').write_text('yes'))\n"
        "sys.stdout.write('a line still in the buffer')\n"
        "sys.stderr.write('and one on stderr')\n"
        "quick_exit(7)\n",
        tmp_path,
    )
    assert done.returncode == 7
    assert done.stdout == "a line still in the buffer"
    assert done.stderr == "and one on stderr"
    assert (tmp_path / "cleaned").read_text() == "yes"


def test_the_teardown_is_skipped(tmp_path: Path) -> None:
    """What the quick exit saves: a live object's finalizer (as every module's objects at
    teardown) does not run; cleanup that matters is registered with atexit instead."""
    code = (
        "import os, sys\n"
        "from privmob.cli.entry import quick_exit\n"
        "class Held:\n"
        "    def __del__(self, write=os.write):\n"
        "        write(1, b'finalized')\n"
        "held = Held()\n"
    )
    normal = child(code + "sys.exit(0)\n", tmp_path)
    assert (normal.returncode, normal.stdout) == (0, "finalized")  # torn down
    quick = child(code + "quick_exit(0)\n", tmp_path)
    assert (quick.returncode, quick.stdout) == (0, "")


def test_exit_status_as_the_interpreter_turns_it(tmp_path: Path) -> None:
    prelude = "from privmob.cli.entry import quick_exit\n"
    assert child(prelude + "quick_exit(None)\n", tmp_path).returncode == 0
    assert child(prelude + "quick_exit(3)\n", tmp_path).returncode == 3
    done = child(prelude + "quick_exit('a message')\n", tmp_path)
    assert done.returncode == 1 and done.stderr == "a message\n"


def test_a_running_non_daemon_thread_is_waited_for(tmp_path: Path) -> None:
    done = child(
        "import sys, threading, time\n"
        "from pathlib import Path\n"
        "from privmob.cli.entry import quick_exit\n"
        "def work():\n"
        "    time.sleep(0.5)\n"
        "    Path(sys.argv[1], 'done').write_text('yes')\n"
        "threading.Thread(target=work).start()\n"
        "quick_exit(5)\n",
        tmp_path,
    )
    assert done.returncode == 5
    assert (tmp_path / "done").read_text() == "yes"


def test_a_release_through_the_script(tmp_path: Path) -> None:
    """The script end to end: the files and the ledger written, the run directory removed,
    a refusal's exit status and message kept."""
    data, grid = tmp_path / "trips.csv", tmp_path / "grid.geojson"
    random_trips(40, 5, seed=3).to_csv(data, index=False)
    box_grid(3).gdf.to_file(grid, driver="GeoJSON")
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "PRIVMOB_CACHE_DIR": "off"}
    (tmp_path / "tmp").mkdir()
    script = Path(sys.executable).with_name("privmob")
    ledger = tmp_path / "ledger.sqlite"

    def od(epsilon: str) -> subprocess.CompletedProcess[str]:
        argv = [str(script), "od", str(data), "-t", str(grid), "-e", epsilon, "-T", "5"]
        argv += ["--budget", "1"]
        argv += ["-o", str(tmp_path / f"out{epsilon}"), "--ledger", str(ledger)]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)

    done = od("1")
    assert done.returncode == 0, done.stderr
    assert "od release written" in done.stdout
    assert (tmp_path / "out1" / "od.parquet").is_file() and ledger.is_file()
    runs = [p for p in (tmp_path / "tmp").glob("privmob-*/*") if p.name.startswith("run-")]
    assert runs == []  # removed by its atexit handler
    refused = od("0.5")  # the budget of 1 is spent
    assert refused.returncode == 3
    assert "budget" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "out0.5").exists()


def test_the_script_collects_cycles_less_often_and_in_process_callers_keep_theirs(
    tmp_path: Path,
) -> None:
    """The script raises the young generation's threshold of the cycle collector (fewer
    collections); privmob.cli.main called in-process leaves the caller's collector alone."""
    default = __import__("gc").get_threshold()[0]
    for entry, young in (("privmob.cli.entry", 50_000), ("privmob.cli", default)):
        ran = child(
            "import atexit, gc, sys\nsys.argv = ['privmob', '--help']\n"
            "atexit.register(lambda: print('young', gc.get_threshold()[0]))\n"
            f"from {entry} import main\nmain()\n",
            tmp_path,
        )
        assert ran.returncode == 0, ran.stderr
        assert f"young {young}" in ran.stdout
