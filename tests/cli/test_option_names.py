"""The options every release command shares keep one spelling, one short flag and one type
(``privmob/cli/options.py``), so they cannot drift apart again; older spellings stay accepted
as hidden aliases."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import typer

from privmob.cli.options import SHARED
from privmob.releases.kinds import BY_NAME, KINDS

#: the release commands and the module that registers each (the registry of kinds)
RELEASES = {k.name: k.cli_module for k in KINDS}
#: shared options each release must have
TZ = {"timezone", "input_timezone"}
EXPECTED = {
    "od": {
        "epsilon",
        "max_trips",
        "tessellation",
        "tile_id",
        "start",
        "end",
        "bin",
        "output",
        "group_size",
    },
    "population": {"epsilon", "tessellation", "tile_id", "start", "end", "output"},
    "report": {
        "epsilon",
        "max_trips",
        "tessellation",
        "tile_id",
        "start",
        "end",
        "output",
        "group_size",
    },
    "density": {"epsilon", "tessellation", "tile_id", "start", "output"},  # -T: --max-visits
    "series-counts": {
        "epsilon",
        "max_trips",
        "tessellation",
        "tile_id",
        "start",
        "end",
        "bin",
        "output",
        "group_size",
    },
    "series": {"epsilon", "start", "end", "bin", "output", "group_size"},
    "counts": {"epsilon", "max_trips", "tessellation", "tile_id", "start", "end", "bin", "output"},
}
for _k in KINDS:  # the count template's kinds: the counts command's options
    if _k.counts is not None:
        EXPECTED.setdefault(_k.name, EXPECTED["counts"])
#: older spellings that existing scripts use: still accepted, hidden from --help
OLD_SPELLINGS = {
    "od": ["--period"],
    "report": ["-M", "--period"],
    "density": ["--zones", "--zone-id", "--max-trips", "-l", "--week"],
    "series-counts": ["--freq", "--max-per-bin", "--bound", "--id-column"],
    "series": ["--freq"],
}


def _command(name: str) -> Any:
    sub = typer.Typer()
    importlib.import_module(RELEASES[name]).register(sub)
    return typer.main.get_group(sub).commands[name]


def _options(cmd: Any) -> list[Any]:
    return [p for p in cmd.params if p.param_type_name == "option" and not p.hidden]


def test_every_release_has_its_expected_options() -> None:
    assert set(EXPECTED) == set(RELEASES)  # a new kind states its shared options


@pytest.mark.parametrize("name", RELEASES)
def test_shared_options_have_one_spelling(name: str) -> None:
    cmd = _command(name)
    shared_flags = {flag: key for key, flags in SHARED.items() for flag in flags}
    present = set()
    for p in _options(cmd):
        flags = set(p.opts) | set(p.secondary_opts)
        if p.name in SHARED:
            present.add(p.name)
            assert flags == set(SHARED[p.name]), (name, p.name, flags)
        else:  # a flag of a shared option is never reused under another name, but the
            # kind's bound keeps every release's -T under its own long name (density)
            bound = BY_NAME[name].bound
            own = set(bound.flags) if bound and p.name == bound.keyword else set()
            assert not (flags - own) & set(shared_flags), (name, p.name, flags)
    assert EXPECTED[name] <= present, f"{name} lacks {EXPECTED[name] - present}"


def test_shared_options_have_one_type() -> None:
    types: dict[str, set[str]] = {}
    for name in RELEASES:
        for p in _options(_command(name)):
            if p.name in SHARED:
                types.setdefault(p.name, set()).add(str(p.type_descriptor.annotation))
    assert {k: v for k, v in types.items() if len(v) > 1} == {}


@pytest.mark.parametrize("name", OLD_SPELLINGS)
def test_old_spellings_are_hidden_aliases(name: str) -> None:
    cmd = _command(name)
    ctx = cmd.context_class(cmd, info_name=name)
    parser = cmd.make_parser(ctx)
    accepted = set(parser._long_opt) | set(parser._short_opt)
    assert set(OLD_SPELLINGS[name]) <= accepted
    shown = {f for p in _options(cmd) for f in (*p.opts, *p.secondary_opts)}
    assert not set(OLD_SPELLINGS[name]) & shown  # hidden from --help


@pytest.mark.parametrize("name", RELEASES)
def test_run_options_reach_the_shared_release_path(name: str) -> None:
    """cli/run.py reads the run options from the parsed parameters by name: a release command
    that spelled one differently would silently lose it (a ledger, a budget, --test-mode)."""
    from dataclasses import fields

    from privmob.cli.run import RunOptions

    params = {p.name for p in _command(name).params}
    core = {"output", "ledger", "dataset", "new_dataset", "budget", "seed", "test_mode",
            "overwrite", "quiet"}  # fmt: skip
    assert core <= params
    engine = {"engine", "memory_limit", "spill_dir", "spark_master", "spark_conf"}
    assert name == "series" or engine <= params
    assert core | engine <= {f.name for f in fields(RunOptions)}
