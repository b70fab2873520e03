"""Plots for the dashboard as inline SVG text: a weighted point cloud with
centers over it, and a line with a band (the elbow curve).

Hand-written because the server should not carry a plotting library for two
charts, and inline SVG needs no script, no CDN and no file. Only numbers and
fixed strings go into the markup (labels are integers), so the output is safe
to insert unescaped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

WIDTH, HEIGHT, PAD = 560, 420, 44


class _Frame:
    """Data coordinates -> pixels, with a margin and equal units on both axes."""

    def __init__(self, xy: NDArray[np.float64], equal: bool = True) -> None:
        lo, hi = xy.min(0), xy.max(0)
        # A flat axis (every point at one value: one distinct center, no coreset) spans a
        # fifth of its value's size, at least 0.2, not 1e-12 (ticks read 6e-14 on such a page).
        flat = hi - lo <= 1e-9 * np.maximum(np.abs(hi), 1.0)
        size = 0.2 * np.maximum(np.abs(hi), 1.0)
        lo, hi = np.where(flat, lo - size / 2, lo), np.where(flat, hi + size / 2, hi)
        span = hi - lo
        lo, hi = lo - 0.06 * span, hi + 0.06 * span
        if equal:
            mid, half = (lo + hi) / 2, (hi - lo).max() / 2
            lo, hi = mid - half, mid + half
        self.lo, self.hi = lo, hi

    def px(self, xy: NDArray[np.float64]) -> NDArray[np.float64]:
        u = (xy - self.lo) / (self.hi - self.lo)
        return np.column_stack([PAD + u[:, 0] * (WIDTH - 2 * PAD), HEIGHT - PAD - u[:, 1] * (HEIGHT - 2 * PAD)])


def _axes(frame: _Frame, xlabel: str, ylabel: str) -> list[str]:
    out = [f'<rect x="{PAD}" y="{PAD}" width="{WIDTH - 2 * PAD}" height="{HEIGHT - 2 * PAD}" class="frame"/>']
    for i, (lo, hi) in enumerate(zip(frame.lo, frame.hi, strict=True)):
        for t in np.linspace(lo, hi, 5):
            if i == 0:
                x = PAD + (t - lo) / (hi - lo) * (WIDTH - 2 * PAD)
                out.append(f'<text x="{x:.1f}" y="{HEIGHT - PAD + 16}" class="tick" text-anchor="middle">{t:.3g}</text>')
            else:
                y = HEIGHT - PAD - (t - lo) / (hi - lo) * (HEIGHT - 2 * PAD)
                out.append(f'<text x="{PAD - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{t:.3g}</text>')
    out.append(f'<text x="{WIDTH / 2}" y="{HEIGHT - 6}" class="label" text-anchor="middle">{xlabel}</text>')
    out.append(f'<text x="12" y="{HEIGHT / 2}" class="label" text-anchor="middle" '
               f'transform="rotate(-90 12 {HEIGHT / 2})">{ylabel}</text>')
    return out


def _open(kind: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
            f'height="{HEIGHT}" class="plot" data-plot="{kind}">')


def centers_plot(cloud: NDArray[np.float64], weights: NDArray[np.float64], centers: NDArray[np.float64],
                 xlabel: str, ylabel: str) -> str:
    """Grey discs (area proportional to weight) under numbered red crosses."""
    cloud = np.asarray(cloud, dtype=np.float64).reshape(-1, 2)
    centers = np.asarray(centers, dtype=np.float64).reshape(-1, 2)
    frame = _Frame(np.vstack([cloud, centers]))
    out = [_open("centers"), *_axes(frame, xlabel, ylabel)]
    if cloud.shape[0]:
        w = np.asarray(weights, dtype=np.float64)
        r = 2.0 + 10.0 * np.sqrt(w / max(float(w.max()), 1e-300))
        for (x, y), rad in zip(frame.px(cloud), r, strict=True):
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{rad:.1f}" class="density"/>')
    for i, (x, y) in enumerate(frame.px(centers)):
        out.append(f'<path d="M{x - 7:.1f},{y - 7:.1f}L{x + 7:.1f},{y + 7:.1f}M{x - 7:.1f},{y + 7:.1f}'
                   f'L{x + 7:.1f},{y - 7:.1f}" class="center"/>')
        out.append(f'<text x="{x + 9:.1f}" y="{y - 8:.1f}" class="center-label">{int(i)}</text>')
    out.append("</svg>")
    return "".join(out)


def line_plot(xs: Sequence[float], ys: Sequence[float], band: Sequence[float] | None,
              xlabel: str, ylabel: str) -> str:
    """A line with a +-band (for the elbow curve: cost of k' = 1..k and its noise)."""
    x = np.asarray(xs, dtype=np.float64)
    y = np.asarray(ys, dtype=np.float64)
    b = np.zeros_like(y) if band is None else np.asarray(band, dtype=np.float64)
    if x.size == 0 or x.shape != y.shape or b.shape != y.shape or not np.isfinite(np.concatenate([x, y, b])).all():
        raise ValueError(f"line_plot needs finite xs, ys, band of one length, got {x.size}, {y.size}, {b.size}")
    frame = _Frame(np.vstack([np.column_stack([x, y - b]), np.column_stack([x, y + b])]), equal=False)
    out = [_open("line"), *_axes(frame, xlabel, ylabel)]
    upper = frame.px(np.column_stack([x, y + b]))
    lower = frame.px(np.column_stack([x, y - b]))[::-1]
    ring = " ".join(f"{px:.1f},{py:.1f}" for px, py in np.vstack([upper, lower]))
    out.append(f'<polygon points="{ring}" class="band"/>')
    line = " ".join(f"{px:.1f},{py:.1f}" for px, py in frame.px(np.column_stack([x, y])))
    out.append(f'<polyline points="{line}" class="line"/>')
    for px, py in frame.px(np.column_stack([x, y])):
        out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" class="point"/>')
    out.append("</svg>")
    return "".join(out)
