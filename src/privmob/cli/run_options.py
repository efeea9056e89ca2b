"""The options of running a release, the same in every release command: where its cost is
charged (``--ledger``, ``--dataset``, ``--budget``, ``--new-dataset-for-same-data``), the
engine (``--engine``, ``--memory-limit``, ``--spill-dir``, ``--spark-master``,
``--spark-conf``), test mode (``--seed``, ``--test-mode``), the output's handling
(``--overwrite``, ``--format``, ``--quiet``) and what the plan must meet before anything is
read (``--max-margin``; ``--yes`` for a plan that warns).

They are declared once, here, and added to a command by :func:`with_run_options`; the command's
function does not list them, and reads those it needs from ``ctx.params``.
:class:`privmob.cli.run.RunOptions` turns them into the :class:`privmob.Session` a release
runs in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from privmob.cli import common as c
from privmob.cli.formats import AllFlowsOpt, FormatOpt, MaxLayerSizeOpt
from privmob.cli.test_mode import TestModeOpt

F = TypeVar("F", bound=Callable[..., Any])

#: name -> (annotation, default), in the order they are listed in ``--help``
RUN_OPTIONS: dict[str, tuple[Any, Any]] = {
    "ledger": (c.LedgerOpt, None),
    "dataset": (c.DatasetOpt, None),
    "new_dataset": (c.NewDatasetOpt, False),
    "budget": (c.BudgetOpt, None),
    "engine": (c.EngineOpt, "duckdb"),
    "memory_limit": (c.MemoryLimitOpt, None),
    "spill_dir": (c.SpillDirOpt, None),
    "spark_master": (c.SparkMasterOpt, None),
    "spark_conf": (c.SparkConfOpt, None),
    "seed": (c.SeedOpt, None),
    "test_mode": (TestModeOpt, False),
    "overwrite": (c.OverwriteOpt, False),
    "output_format": (FormatOpt, None),
    "max_layer_size": (MaxLayerSizeOpt, None),
    "all_flows": (AllFlowsOpt, False),
    "max_margin": (c.MaxMarginOpt, None),
    "yes": (c.YesOpt, False),
    "quiet": (c.QuietOpt, False),
}
#: the options of the map layers: a command without ``--format`` has none of them
LAYER_OPTIONS = ("output_format", "max_layer_size", "all_flows")
#: a release read without an engine (an aggregated series) has no engine options
ENGINE_OPTIONS = ("engine", "memory_limit", "spill_dir", "spark_master", "spark_conf")


def with_run_options(*, without: tuple[str, ...] = ()) -> Callable[[F], F]:
    """Add the run options (all but ``without``, and those the command declares itself with
    its own help) to a release command's function, after its own parameters."""
    if "output_format" in without:
        without = (*without, *LAYER_OPTIONS)
    return c.with_options(RUN_OPTIONS, without=without)
