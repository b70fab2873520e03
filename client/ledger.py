"""The device's own privacy ledger: what it has spent, and what it sent.

A JSON file on the device. Every read-modify-write holds an exclusive
``flock`` on a sidecar lock file and writes atomically (temp file, fsync,
rename, fsync of the directory), so processes sharing one ledger can
neither lose a charge nor answer a round twice: ``record`` re-reads the
file under the lock, returns the stored message if the round is already
there, and otherwise builds the message *inside* the lock and stores it
before anything is sent. A retry (even after a crash, even from another
process) resends that same message; a point is never randomised twice.

What a round costs (``Spend``):
- ``local``: an eps-LDP report; eps counts against the cap;
- ``none``: a secure-sum contribution (refine rounds, shuffle-model
  sketches): one device's shares carry no DP guarantee on their own (its
  noise share is tiny), so nothing is charged against the local cap, the
  round is recorded as "no local guarantee" with its central (eps, delta),
  and a device takes part only if its owner opted in (``Device``'s policy).

A spend with a ``family`` (a local refine round names its parent) is
refused, under the same lock, when the ledger holds the parent or another
round of that family: such rounds take fresh devices, so each device's
reports across the family are one eps-LDP report (parallel composition).
"""

from __future__ import annotations

import fcntl
import json
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from shoal.common.errors import PrivacyError

Guarantee = Literal["local", "none"]


@dataclass(frozen=True)
class Spend:
    """What answering one round costs this device (see the module docstring)."""

    guarantee: Guarantee
    epsilon: float
    central_epsilon: float | None = None
    delta: float | None = None
    note: str = ""
    family: str = ""  # a parent round id: refused if this device answered it or another round of its family

    def __post_init__(self) -> None:
        if self.guarantee not in ("local", "none"):
            raise PrivacyError(f"guarantee must be 'local' or 'none', got {self.guarantee!r}")
        if self.guarantee == "local" and not (math.isfinite(self.epsilon) and self.epsilon >= 0):
            raise PrivacyError(f"a local spend needs a finite eps >= 0, got {self.epsilon}")
        if self.guarantee == "none" and self.epsilon != 0:
            raise PrivacyError(f"a round without a local guarantee charges no local eps, got {self.epsilon}")


class Ledger:
    def __init__(self, path: Path | str, cap: float = 10.0) -> None:
        if not (math.isfinite(cap) and cap > 0):
            raise PrivacyError(f"ledger cap must be finite and > 0, got {cap}")
        self.path = Path(path)
        self.cap = cap

    @property
    def entries(self) -> dict[str, dict[str, Any]]:
        """Every recorded round (a consistent snapshot: the file is replaced atomically)."""
        if not self.path.exists():
            return {}
        rounds: dict[str, dict[str, Any]] = json.loads(self.path.read_text())["rounds"]
        return rounds

    @property
    def spent(self) -> float:
        """Local eps spent so far (basic composition over the rounds with a local guarantee)."""
        return _spent(self.entries)

    def message_for(self, round_id: str) -> str | None:
        entry = self.entries.get(round_id)
        return None if entry is None else str(entry["message"])

    def withdrawal_for(self, round_id: str) -> str | None:
        """The sealed withdrawal recorded with the round's message (continual rounds), if any."""
        entry = self.entries.get(round_id)
        return None if entry is None or entry.get("withdrawal") is None else str(entry["withdrawal"])

    def record(self, round_id: str, spend: Spend, make_message: Callable[[], str | tuple[str, str]]) -> str:
        """The message for ``round_id``: the stored one if any process recorded
        it already, else ``make_message()`` recorded durably (under the lock,
        refused beyond the cap) before it is returned for sending. A builder that
        returns (message, withdrawal) has the withdrawal recorded beside it."""
        with self._locked():
            entries = self.entries
            if round_id in entries:
                return str(entries[round_id]["message"])
            if spend.family and (spend.family in entries
                                 or any(e.get("family") == spend.family for e in entries.values())):
                raise PrivacyError(
                    f"round {round_id} takes fresh devices only: this device already answered round "
                    f"{spend.family} or another round opened on it (parallel composition, kinds/local_refine.py)"
                )
            spent = _spent(entries)
            if spend.guarantee == "local" and spent + spend.epsilon > self.cap + 1e-12:
                raise PrivacyError(
                    f"round {round_id} needs epsilon {spend.epsilon:g} but this device has spent "
                    f"{spent:g} of its cap {self.cap:g}"
                )
            made = make_message()
            message, withdrawal = made if isinstance(made, tuple) else (made, None)
            entries[round_id] = {
                "guarantee": spend.guarantee, "epsilon": spend.epsilon, "central_epsilon": spend.central_epsilon,
                "delta": spend.delta, "note": spend.note, "family": spend.family, "message": message,
            }
            if withdrawal is not None:
                entries[round_id]["withdrawal"] = withdrawal
            self._write(entries)
            return message

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a+") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _write(self, entries: dict[str, dict[str, Any]]) -> None:
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            json.dump({"version": 2, "cap": self.cap, "rounds": entries}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _spent(entries: dict[str, dict[str, Any]]) -> float:
    return math.fsum(float(e["epsilon"]) for e in entries.values() if e.get("guarantee", "local") == "local")
