"""A Markov transition matrix for the temporal privacy loss of a series
(:mod:`privmob.privacy.temporal`, ``privmob tpl``), read from a CSV (no header) or JSON file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from privmob.errors import InputError
from privmob.privacy.temporal import transition_matrix


def read_transition_matrix(spec: str | Path) -> np.ndarray | None:
    """The row-stochastic matrix in the file ``spec`` (CSV without header, or JSON: a list of
    rows or ``{"matrix": [...]}``); ``"none"``: no correlation (``None``)."""
    if str(spec).lower() == "none":
        return None
    path = Path(spec)
    if not path.is_file():
        raise InputError("matrix file not found", source=str(spec))
    try:
        if path.suffix == ".json":
            data = json.loads(path.read_text())
            if isinstance(data, dict):
                data = data.get("matrix", data)
            matrix = np.asarray(data, dtype=float)
        else:
            matrix = np.loadtxt(path, delimiter=",", ndmin=2)
    except (ValueError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read a matrix of numbers: {exc}", source=str(spec)) from exc
    return transition_matrix(matrix, name=f"matrix {spec}")
