"""The public names of ``privmob``: the error classes a caller catches are exported, and an
old name still works for one minor version with a warning that points at the caller's line."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

import privmob as pm
import privmob.errors as errors

ERRORS = ("PrivmobError", "InputError", "ConfigError", "BudgetError", "OutputError",
          "EngineError", "PrivmobWarning")  # fmt: skip


@pytest.mark.parametrize("name", ERRORS)
def test_the_error_classes_are_exported(name: str) -> None:
    assert getattr(pm, name) is getattr(errors, name)
    assert name in pm.__all__


def test_every_refusal_is_caught_by_the_base_class() -> None:
    for name in ERRORS[1:-1]:
        assert issubclass(getattr(pm, name), pm.PrivmobError)


def test_pm_release_still_works_with_a_warning_at_the_callers_line() -> None:
    from privmob.releases.specs import release

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = pm.release
    assert old is release
    (w,) = caught
    assert issubclass(w.category, FutureWarning)
    assert "Session" in str(w.message) and "next minor version" in str(w.message)
    assert w.filename == __file__  # the user's line, not privmob's


def test_importing_the_errors_loads_neither_pandas_nor_duckdb() -> None:
    code = (
        "import sys, privmob as pm; pm.ConfigError; pm.BudgetError; "
        "print(any(m in sys.modules for m in ('pandas', 'duckdb')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
