"""Taking part in an elbow round: the device's cost drops to the parent's
ordered centers, through secure summation (no local guarantee: only with
the owner's consent; ``common/kinds/elbow.py``)."""

from __future__ import annotations

from shoal.client.kinds.shares import SharesDevice
from shoal.common.kinds.elbow import NAME, contributions

KIND = SharesDevice(NAME, contributions)
