"""What a round's page and the rounds list show, from a stored round: its
summary, its privacy numbers, and its result's tables and plots.

Written against every result shape a kind's decoder produces (issue 39: the
page of any tree round with fewer distinct centers than k was a 500, because
``center_errors`` has one entry per distinct center and ``centers`` k rows).
Nothing here assumes a list's length or a field's presence: a missing or
short field reads "n/a".

The privacy numbers come from ``server/edge/round_privacy.py`` (the round
kind's own privacy statement, never config fields, whose meaning differs by
kind), which the REST listing's ``privacy`` summary shares.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from markupsafe import Markup
from numpy.typing import NDArray

from shoal.common.picture import coreset_picture, project
from shoal.server.edge.dashboard.svg import centers_plot, line_plot
from shoal.server.edge.round_privacy import RoundPrivacy
from shoal.server.edge.round_privacy import number as _number

CONFIG_KEYS = ("kind", "encoder", "model", "k", "dim", "n_expected", "min_batch", "levels")


def summary(config: dict[str, Any], privacy: RoundPrivacy) -> list[tuple[str, Any]]:
    """The round's parameters: the config fields that apply to its kind and model
    (a local round has no delta or smallest batch), and its privacy numbers."""
    spec: dict[str, Any] = config["spec"] if isinstance(config.get("spec"), dict) else {}
    flat: dict[str, Any] = {**config, **{k: spec[k] for k in ("k", "dim") if k in spec}}
    if spec:
        flat["encoder"] = spec.get("algorithm")
    flat["model"] = privacy.model or flat.get("model")
    out: list[tuple[str, Any]] = []
    for key in CONFIG_KEYS:
        value = flat.get(key)
        if value in (None, "") or (key == "min_batch" and not value):
            continue
        out.append((key.replace("_", " "), value))
        if key == "model":
            out.extend(privacy.rows())
    if not flat["model"]:  # a round opened on a parent, not decoded yet: its own event's guarantee
        out.extend(privacy.rows())
    b = config.get("bound")
    if isinstance(b, dict):
        out.append(("bound", f"L2 radius {b['radius']}" if b.get("radius") is not None
                    else f"box low {b.get('low')} high {b.get('high')}"))
    return out


def _centers(result: dict[str, Any]) -> NDArray[np.float64]:
    try:
        centers = np.asarray(result.get("centers") or [], dtype=np.float64)
    except (TypeError, ValueError):
        return np.zeros((0, 1))
    if centers.ndim != 2 or not np.isfinite(centers).all():
        return np.zeros((0, 1))
    return centers


def _at(values: Any, i: int) -> float | None:
    return _number(values[i]) if isinstance(values, list) and i < len(values) else None


def center_rows(result: dict[str, Any], centers: NDArray[np.float64]) -> list[dict[str, Any]]:
    """One row per center: its size and expected error where the result gives
    them. A decoder that found fewer distinct centers than k repeats one of them
    (``center_errors`` then has one entry per distinct center): a repeated row
    says which earlier row it repeats and takes that row's error."""
    errors = (result.get("quality") or {}).get("center_errors") if isinstance(result.get("quality"), dict) else None
    sizes = result.get("sizes")
    rows: list[dict[str, Any]] = []
    for i, c in enumerate(centers):
        same = next((j for j in range(i) if np.array_equal(centers[j], c)), None)
        error = _at(errors, i)
        if same is not None and error is None:
            error = rows[same]["error"]
        rows.append({"i": i, "size": _at(sizes, i), "error": error, "repeats": same,
                     "coords": ", ".join(f"{v:.4g}" for v in c)})
    return rows


def _plot(result: dict[str, Any], centers: NDArray[np.float64]) -> tuple[Markup, str]:
    """The centers over the result's coreset picture (or alone when it has none)."""
    d = centers.shape[1]
    picture: Any = result.get("picture")
    try:
        cloud = np.asarray(picture["xy"], dtype=np.float64).reshape(-1, 2)
        weights = np.asarray(picture["weights"], dtype=np.float64).reshape(-1)
        xy = project(picture, centers)
        note = str(picture["note"])
        if len(weights) != len(cloud) or xy.shape != (len(centers), 2) or not np.isfinite(cloud).all():
            raise ValueError("picture and centers disagree")
    except (TypeError, KeyError, ValueError):
        own = coreset_picture(centers, np.ones(len(centers)))
        assert own is not None
        cloud, weights, xy = np.zeros((0, 2)), np.zeros(0), project(own, centers)
        note = "centers only: this result has no coreset to draw"
    labels = ("feature 0", "feature 1" if d > 1 else "") if d <= 2 else ("principal axis 1", "principal axis 2")
    return Markup(centers_plot(cloud, weights, xy, *labels)), note


def result_view(result: dict[str, Any]) -> dict[str, Any]:
    """What the result section shows: centers rows, verdict, privacy, plots (a
    result, or a continual round's latest step, which releases no sizes)."""
    centers = _centers(result)
    quality: dict[str, Any] = result["quality"] if isinstance(result.get("quality"), dict) else {}
    plot, note = _plot(result, centers) if len(centers) else (None, "")
    elbow: dict[str, Any] = result["elbow"] if isinstance(result.get("elbow"), dict) else {}
    costs = [c for c in elbow.get("costs") or [] if isinstance(c, dict)]  # [{k, cost, band}] (api_models.ElbowOut)
    elbow_svg = None
    try:
        if costs:
            elbow_svg = Markup(line_plot([c["k"] for c in costs], [c["cost"] for c in costs],
                                         [c.get("band") or 0.0 for c in costs], "k'", "estimated cost"))
    except (KeyError, TypeError, ValueError):
        elbow_svg = None
    return {"rows": center_rows(result, centers), "quality": quality, "privacy": result.get("privacy") or {},
            "plot": plot, "plot_note": note, "elbow": elbow_svg, "suggested_k": elbow.get("suggested_k"),
            "band_rule": elbow.get("band_rule") or "two deviations", "step": result.get("step"),
            "diagnostics": json.dumps(result.get("diagnostics"), indent=1, default=str)}
