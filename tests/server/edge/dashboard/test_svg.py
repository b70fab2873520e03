"""The dashboard's inline SVG plots."""

import re

import numpy as np
import pytest

from shoal.server.edge.dashboard.svg import HEIGHT, PAD, WIDTH, centers_plot, line_plot


def _coords(svg: str, attr: str) -> np.ndarray:
    return np.array([float(v) for v in re.findall(rf'{attr}="([-0-9.]+)"', svg)])


def test_centers_plot_draws_every_node_and_center_inside_the_frame():
    rng = np.random.default_rng(0)
    svg = centers_plot(rng.standard_normal((50, 2)), rng.uniform(1, 5, 50), rng.standard_normal((4, 2)), "x", "y")
    assert svg.count('class="density"') == 50 and svg.count('class="center"') == 4
    cx, cy = _coords(svg, "cx"), _coords(svg, "cy")
    assert (cx >= PAD).all() and (cx <= WIDTH - PAD).all() and (cy >= PAD).all() and (cy <= HEIGHT - PAD).all()


def test_line_plot_draws_the_band_and_one_point_per_k():
    svg = line_plot([1, 2, 3, 4], [10.0, 4.0, 2.0, 1.8], [1.0, 0.5, 0.5, 0.5], "k'", "cost")
    assert svg.count('class="point"') == 4 and 'class="band"' in svg


@pytest.mark.parametrize("xs, ys, band", [([], [], None), ([1, 2], [1.0], None), ([1], [float("nan")], None),
                                          ([1, 2], [1.0, 2.0], [0.1])])
def test_line_plot_refuses_bad_series(xs, ys, band):
    with pytest.raises(ValueError, match="line_plot needs"):
        line_plot(xs, ys, band, "x", "y")


def test_centers_at_one_point_get_readable_axes():
    """One distinct center and no coreset: the axes span a readable range around it."""
    svg = centers_plot(np.zeros((0, 2)), np.zeros(0), np.zeros((3, 2)), "x", "y")
    ticks = [float(t) for t in re.findall(r'class="tick"[^>]*>([^<]+)<', svg)]
    assert max(ticks) - min(ticks) > 0.1
