"""Every release kind gives the values it gave before the registry refactor (issue 28): each
golden case (``tests/releases/golden_cases.py``) is run again in test mode with its seed and its
tables, CSV layers and metadata compared value for value with ``tests/releases/golden/*.json``.

Metadata may gain keys (issue 28 adds what a release counted); a recorded key may not change
its value, and tables may not change at all, unless the golden file is re-recorded on purpose
(``python -m tests.releases.golden_cases --write CASE``) and the change named.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.releases.golden_cases import CASES, golden_path, run_case


@pytest.mark.parametrize("case", sorted(CASES))
def test_release_outputs_match_the_golden_values(case: str, tmp_path: Path) -> None:
    expected = json.loads(golden_path(case).read_text())
    got = json.loads(json.dumps(run_case(case, tmp_path)))  # the same JSON round trip
    assert sorted(got["tables"]) == sorted(expected["tables"])
    for name, table in expected["tables"].items():
        assert got["tables"][name] == table, f"{case}: table {name} changed"
    assert got["layers"] == expected["layers"], f"{case}: a CSV layer changed"
    changed = {
        k: (v, got["metadata"].get(k, "<missing>"))
        for k, v in expected["metadata"].items()
        if got["metadata"].get(k, "<missing>") != v
    }
    assert not changed, f"{case}: metadata changed (golden, now): {changed}"
