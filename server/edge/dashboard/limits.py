"""The log-in's rate limit (issue 39: 300 wrong tokens in 5 s were all
answered, and the right one then worked).

Wrong tokens are counted in a sliding window of ``WINDOW_SECONDS``, per client
address and over all addresses together. An address with ``PER_ADDRESS``
wrong tokens in the window, or any address while the whole server has
``GLOBAL`` in it, is answered 429 with ``Retry-After`` (the seconds until the
oldest counted failure leaves the window) **without the token being checked**:
a refused attempt tells nothing, so it cannot be used to keep guessing, and it
is not counted (a refused flood does not extend the lock).

Limits of this rule, said plainly:

- The client address is the TCP peer's. Behind a reverse proxy every client
  has the proxy's address, so the per-address limit becomes a second global
  one (the proxy should rate-limit ``/ui/login`` by the real client itself).
- The global limit lets anyone who can reach the log-in page lock the
  dashboard for a minute at a time by sending wrong tokens; the operator's
  REST API (bearer token) is not affected.
- The counts live in the server process: N replicas allow N times as many.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque

WINDOW_SECONDS = 60.0
PER_ADDRESS = 20  # the 21st wrong token within a minute from one address is refused
GLOBAL = 100


class LoginLimiter:
    """Sliding-window counts of wrong tokens (module docstring)."""

    def __init__(self, per_address: int = PER_ADDRESS, total: int = GLOBAL, window: float = WINDOW_SECONDS) -> None:
        self.per_address, self.total, self.window = per_address, total, window
        self._by_address: dict[str, deque[float]] = {}
        self._all: deque[float] = deque()
        self._lock = threading.Lock()

    def _prune(self, now: float) -> None:
        edge = now - self.window
        while self._all and self._all[0] <= edge:
            self._all.popleft()
        for address in list(self._by_address):
            times = self._by_address[address]
            while times and times[0] <= edge:
                times.popleft()
            if not times:
                del self._by_address[address]

    def retry_after(self, address: str, now: float | None = None) -> int | None:
        """Seconds this address must wait before a log-in is checked again, or None if it may try now."""
        t = time.monotonic() if now is None else now
        with self._lock:
            self._prune(t)
            waits = []
            times = self._by_address.get(address)
            if times is not None and len(times) >= self.per_address:
                waits.append(times[len(times) - self.per_address] + self.window - t)
            if len(self._all) >= self.total:
                waits.append(self._all[len(self._all) - self.total] + self.window - t)
        return max(1, math.ceil(max(waits))) if waits else None

    def failed(self, address: str, now: float | None = None) -> None:
        """Count one wrong token from ``address``."""
        t = time.monotonic() if now is None else now
        with self._lock:
            self._prune(t)
            self._by_address.setdefault(address, deque()).append(t)
            self._all.append(t)
