"""Crash injection: ``privmob od`` killed with SIGKILL at random moments, N times (default 50).

Every run must end in exactly one of: no charge and no output; a charge and a complete output;
a charge and a sealed staged release that ``privmob ledger recover`` completes; a charge and an
unsealed staged release (killed after the charge, before every file was written) that recover
removes, the budget spent. A torn file, a charge without output or staged release, or an output
without charge fails the run (tests/crash.py classifies).

Run from the repository root::

    uv run python benchmarks/bench_crash.py --runs 50

Half the kill moments are drawn uniformly over one measured run; the other half fall 0-250 ms
after the release's staging directory appears (the window of writing, fsync, seal and rename
after the charge, which a uniform draw rarely hits).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.crash import (
    child_env,
    classify,
    kill_od_at,
    kill_od_in_publication,
    make_inputs,
    run_od,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    from privmob.privacy.ledger import Ledger

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        make_inputs(work)
        t0 = time.perf_counter()
        res = run_od(work, work / "full")
        full = time.perf_counter() - t0
        assert res.returncode == 0, res.stderr
        print(f"one full run: {full:.1f} s", flush=True)
        tally: Counter[str] = Counter()
        for i in range(args.runs):
            out = work / f"run-{i}"
            before = len(Ledger(work / "ledger.sqlite").entries("d"))
            if i % 2 == 0:  # anywhere in the run
                at = rng.uniform(0.0, full)
                kill_od_at(work, out, at)
                when = f"at {at:5.2f} s"
            else:  # in the publication window: writing, fsync, charge, rename
                at = rng.uniform(0.0, 0.25)
                kill_od_in_publication(work, out, at)
                when = f"{at * 1000:5.0f} ms after staging began"
            state = classify(work, out, before)  # raises on a torn or inconsistent run
            tally[state] += 1
            print(f"run {i + 1:3d}: killed {when} -> {state}", flush=True)
        killed_left = sum(1 for p in (work / "tmp").rglob("run-*"))
        subprocess.run(  # one later run removes the working directories of killed runs
            [sys.executable, "-c", "from privmob.engine.rundir import open_run_dir as o; o()"],
            env=child_env(work),
            check=True,
        )
        left = list((work / "tmp").glob("privmob-*/*"))
        print(
            f"{args.runs} runs: "
            + ", ".join(f"{k} {v}" for k, v in sorted(tally.items()))
            + "; torn or inconsistent: 0"
            + f"; run directories of killed runs: {killed_left} before one later run, "
            f"{len(left)} after"
        )


if __name__ == "__main__":
    main()
