"""Taking part in a partition round: the device's point and a count, added to
its public bucket's slot, through secure summation (no local guarantee: only
with the owner's consent; ``common/kinds/partition.py``)."""

from __future__ import annotations

from shoal.client.kinds.shares import SharesDevice
from shoal.common.kinds.partition import NAME, contributions

KIND = SharesDevice(NAME, contributions)
