"""Taking part in an elbow round: the device's cost drops to the parent's
ordered centers, through secure summation (no local guarantee: only with
the owner's consent; ``common/elbow_round.py``)."""

from __future__ import annotations

from shoal.client.kinds.shares import SharesDevice
from shoal.common.elbow_round import NAME, contributions

KIND = SharesDevice(NAME, contributions)
