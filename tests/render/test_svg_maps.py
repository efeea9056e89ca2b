"""Map and axis rules checked without a browser (the browser checks are in test_maps_browser)."""

from __future__ import annotations

import re

import numpy as np

from privmob.privacy.mechanisms import Noise, NoiseKind
from privmob.render import svg
from privmob.render.report_html import noise_floor

TESS = {
    "outlines": [[[(0, 0), (1, 0), (1, 1), (0, 1)]], [[(1, 0), (2, 0), (2, 1), (1, 1)]]],
    "names": ["West <A>", "East"],
    "lng": [0.5, 1.5],
    "lat": [0.5, 0.5],
}


def test_flow_map_without_flows_says_so_and_draws_none():
    out = svg.flow_map(TESS, [], note="no flow clears the noise floor 85")
    assert "pm-flow" not in out and "no flow clears the noise floor 85" in out
    assert "<title>West &lt;A&gt;</title>" in out  # tile names on hover, escaped


def test_flow_map_draws_lines_with_a_width_legend():
    out = svg.flow_map(TESS, [(0, 1, 40.0)], unit="trips")
    assert out.count("class='pm-flow'") == 1 and "40 trips" in out
    assert "line width: trips (noisy)" in out and "class='pm-legend'" in out


def test_choropleth_legend_states_unit_and_breaks_up_to_the_maximum():
    out = svg.choropleth(TESS, [3, 1600], unit="visits")
    breaks = re.findall(r"class='pm-break'[^>]*>([^<]*)<", out)
    assert breaks[0] == "0" and breaks[-1] == "1,600" and len(breaks) >= 3
    assert "visits (noisy; classes of equal width)" in out and "East: 1,600 visits" in out


def test_noise_floor_bounds_the_largest_of_n_noise_draws():
    """With b = 6 and N = 69,169 cells, the floor is reached by no cell's noise in >= 95% of
    draws: checked on 200 draws of N (expected failures ~ Binomial(200, <=0.05): the test
    allows 25, false-failure rate < 1e-4)."""
    noise = {"kind": "discrete-laplace", "scale": 6.0}
    n = 69_169
    floor = noise_floor(noise, n)
    assert floor > 6 * np.log(n)  # stricter than the old "b ln N" caption (~67)
    dist = Noise(NoiseKind.DISCRETE_LAPLACE, 6.0)
    exceed = sum(
        int(np.abs(dist.add(np.zeros(n, dtype=np.int64), rng=seed)).max() > floor)
        for seed in range(200)
    )
    assert exceed <= 25


def test_axis_labels_of_a_year_of_days_are_thinned_to_fit():
    days = [str(d) for d in np.arange("2024-01-01", "2025-01-01", dtype="datetime64[D]")]
    out = svg.bar_chart(days, list(range(len(days))), width=760)
    xs = [float(x) for x in re.findall(r"class='pm-xlabel' x='([\d.]+)'", out)]
    assert 5 <= len(xs) <= 20
    assert min(np.diff(xs)) >= len(days[0]) * svg.CHAR_PX  # centres a label width apart
    assert max(xs) + len(days[0]) * svg.CHAR_PX / 2 <= 760  # the last one is not clipped


def test_a_choropleth_from_outlines_fitted_once_is_the_same_drawing():
    """Small maps of one size share their tiles' paths (svg.TileOutlines): the same SVG as
    each map fitting its own; outlines of another size or another tessellation are not used."""
    fitted = svg.TileOutlines(TESS, 190, 160)
    for values in ([3, 1600], [0, -4]):
        alone = svg.choropleth(TESS, values, width=190, height=160, title="t", margin=5)
        shared = svg.choropleth(
            TESS, values, width=190, height=160, title="t", margin=5, tiles=fitted
        )
        assert shared == alone
    assert svg.choropleth(TESS, [1, 2], tiles=fitted) == svg.choropleth(TESS, [1, 2])
    other = {**TESS, "outlines": [[[(0, 0), (3, 0), (3, 3), (0, 3)]], TESS["outlines"][1]]}
    assert svg.choropleth(other, [1, 2], width=190, height=160, tiles=fitted) == svg.choropleth(
        other, [1, 2], width=190, height=160
    )
