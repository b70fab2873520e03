"""What every message shares, whichever model carries it: its random id, and
the limits and the unit-ball check of the points it carries.

Split from ``messages.py`` (the device's JSON and ``ReportBatch``) so that
the pydantic models (``models.py``) and the device's writer both import it
and neither imports the other: ``ReportBatch`` builds and reads
``DeviceMessage`` (``models.py``), whose checks need these.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ReportError
from shoal.common.randomness.device_random import token_bytes

MAX_POINT_DIM = 100_000


def ball_rows(points: NDArray[np.float64]) -> NDArray[np.float64]:
    """(m, dim) points checked to lie in the unit ball, with a little float slack
    (1e-6) that is then clipped away, so the curator's sensitivity holds exactly;
    all-NaN rows (no point) pass through. Raises ``ReportError`` naming the norm."""
    norms = np.linalg.norm(points, axis=1)
    if np.any(norms > 1 + 1e-6):
        raise ReportError(f"a point has norm {float(np.nanmax(norms)):.6g}: points are sent in the unit ball "
                          "(clip into the round's bound, then PublicBound.to_ball)")
    return points / np.where(np.isnan(norms), 1.0, np.maximum(norms, 1.0))[:, None]


def new_message_id() -> str:
    """A random 128-bit id (hex): lets a server drop a retried duplicate."""
    return token_bytes(16).hex()
