"""Taking part in a refine round: the device's point and a count, added to
its nearest parent center's slot, through secure summation (no local
guarantee: only with the owner's consent; ``common/kinds/refine.py``)."""

from __future__ import annotations

from shoal.client.kinds.shares import SharesDevice
from shoal.common.kinds.refine import NAME, contributions

KIND = SharesDevice(NAME, contributions)
