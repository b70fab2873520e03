"""The result document every kind returns (``GET /rounds/{id}/result``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from shoal.server.decoders.result import ClusteringResult


def result_dict(round_id: str, res: ClusteringResult) -> dict[str, Any]:
    diagnostics = dict(res.diagnostics)
    elbow = diagnostics.pop("elbow", None)  # tree rounds with centers "greedy": a field of the result
    out = {
        "round_id": round_id,
        "centers": res.centers.tolist(),
        "ball_centers": res.ball_centers.tolist(),
        "sizes": [float(v) for v in res.sizes],
        "privacy": res.privacy,
        "diagnostics": jsonable(diagnostics),
        "quality": jsonable(res.quality) or None,  # a decoder without a verdict says nothing, not {}
        "picture": res.picture,
    }
    if elbow is not None:
        out["elbow"] = jsonable(elbow)
    return out


def jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj
