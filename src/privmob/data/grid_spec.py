"""A regular lng/lat grid (:class:`GridSpec`): its cell edges and arithmetic point-in-cell, with
the polygon path's border rule. Built or recognised by :mod:`privmob.data.grids`; a
:class:`~privmob.data.tessellation.Tessellation` made from one assigns points with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from privmob.lazy_imports import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use, not before a release's plan line (issue 43)
    np = lazy_module("numpy")


@dataclass(frozen=True)
class GridSpec:
    """A regular lng/lat grid: cell (row, col) spans lng_edges[col:col+2] x lat_edges[row:row+2].

    The tile id (and index) of cell (row, col) is ``row * ncols + col``; row 0 is the south.
    """

    lng_edges: np.ndarray
    lat_edges: np.ndarray

    @property
    def nrows(self) -> int:
        return len(self.lat_edges) - 1

    @property
    def ncols(self) -> int:
        return len(self.lng_edges) - 1

    def assign(self, lng: np.ndarray, lat: np.ndarray) -> np.ndarray:
        """Arithmetic point-in-cell; a point on a shared edge goes to the lower row/column."""
        col = _edge_bin(self.lng_edges, lng)
        row = _edge_bin(self.lat_edges, lat)
        out = row.astype(np.int64) * self.ncols + col
        out[(col < 0) | (row < 0)] = -1
        return np.asarray(out.astype(np.int32))


def _edge_bin(edges: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Bin of x among sorted edges: bin i is (edges[i], edges[i+1]], bin 0 closed; -1 outside.

    A value equal to an inner edge falls into the lower bin (the smaller tile index), as in
    the polygon path; the edges are the same floats the cell polygons are built from.
    """
    b = np.searchsorted(edges, x, side="left") - 1
    b[x == edges[0]] = 0
    b[(b < 0) | (b >= len(edges) - 1) | np.isnan(x)] = -1
    return b
