"""The device's own privacy ledger: what it has spent, and what it sent.

A JSON file on the device, written atomically (temp file, fsync, rename).
Each round is charged once: the encoded message is recorded *before* it is
sent, so a retry (even after a crash) resends the same message instead of
releasing a second randomisation of the same point.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from shoal.common.errors import PrivacyError


class Ledger:
    def __init__(self, path: Path | str, cap: float = 10.0) -> None:
        if not (math.isfinite(cap) and cap > 0):
            raise PrivacyError(f"ledger cap must be finite and > 0, got {cap}")
        self.path = Path(path)
        self.cap = cap
        self.entries: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            self.entries = json.loads(self.path.read_text())["rounds"]

    @property
    def spent(self) -> float:
        return math.fsum(float(e["epsilon"]) for e in self.entries.values())

    def message_for(self, round_id: str) -> str | None:
        entry = self.entries.get(round_id)
        return None if entry is None else str(entry["message"])

    def charge(self, round_id: str, epsilon: float, message_json: str) -> None:
        """Record a round's spend and message durably; refuse beyond the cap."""
        if round_id in self.entries:
            raise PrivacyError(f"round {round_id} was already charged")
        if self.spent + epsilon > self.cap + 1e-12:
            raise PrivacyError(
                f"round {round_id} needs epsilon {epsilon:g} but this device has spent "
                f"{self.spent:g} of its cap {self.cap:g}"
            )
        self.entries[round_id] = {"epsilon": float(epsilon), "message": message_json}
        self._write()

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        with open(tmp, "w") as f:
            json.dump({"version": 1, "cap": self.cap, "rounds": self.entries}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
