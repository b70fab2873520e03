"""Continual rounds' steps: closing them and publishing their releases (issue 18, Build 5).

A continual round's events are stored stamped with the step open at their
commit (``Store.add_events``). Closing a step is one database statement
(``Store.close_step``: the round must be open and below its horizon); the
step's release is then computed by the round's curator
(``rounds/kinds/continual.py``) and stored (``Store.add_step_release``).

Several replicas serve one round, so the curator's state is not kept in
the database: it is a function of the stored events and of the curator's
noise, which every replica draws from one generator seeded by a secret
derived from the server's private key (HKDF-SHA256, per round), the key
all replicas share to open sealed messages. A replica whose in-process
curator is behind (it restarted, or another replica closed steps) replays
the closed steps from the stored rows (``decoders/continual/events.py``)
and gets the same noisy sums; a curator already in this process reads
only the rows of the steps it has not applied (``Store.load_steps``, the
step index) and keeps what the earlier ones left (``events.Items``); a release missing after a crash between
closing and storing is computed again, identical, by whoever reads it
next. Whoever holds the key could recompute the noise: that is the
curator, who sees the raw points anyway (the statement covers everyone
who sees the releases, not the server).

Replays rely on the same rows giving the same draws: the curator's noise
consumes its generator independently of the data (exact samplers), and
the data-dependent stochastic roundings use a fixed number of draws per
point, so even a replica whose floating point differed in a last bit
would only move a rounding of the data, never the noise.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from shoal.server.decoders.continual.events import Items, next_steps
from shoal.server.storage.store import Store

NOISE_INFO = b"shoal continual curator noise v1 "


def noise_seed(key: X25519PrivateKey, round_id: str) -> int:
    """The round's private noise seed: 256 bits of HKDF-SHA256 over the server's key."""
    raw = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                            serialization.NoEncryption())
    return int.from_bytes(HKDF(hashes.SHA256(), 32, salt=None, info=NOISE_INFO + round_id.encode()).derive(raw), "big")


class Steps:
    """The curators of this process's continual rounds, one lock each."""

    def __init__(self, store: Store, key: X25519PrivateKey) -> None:
        self.store, self.key = store, key
        self._curators: dict[str, tuple[Any, Items]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, round_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(round_id, threading.Lock())

    def releases(self, kind: Any, config: Any, round_id: str, since: int = 0) -> list[dict[str, Any]]:
        """Every closed step's release after ``since``, computing the missing ones."""
        closed = self.store.steps_closed(round_id)
        stored = self.store.step_releases(round_id, since)
        if len(stored) < closed - since:
            self._catch_up(kind, config, round_id, closed)
            stored = self.store.step_releases(round_id, since)
        return stored

    def _catch_up(self, kind: Any, config: Any, round_id: str, closed: int) -> None:
        with self._lock(round_id):
            held = self._curators.get(round_id)
            if held is None:
                held = (kind.curator(config, np.random.default_rng(noise_seed(self.key, round_id))),
                        Items.empty(config.dim))
            curator, items = held
            done = curator.steps
            if done >= closed:
                return
            width, _ = kind.row_width(config)
            rows = self.store.load_steps(round_id, width, done + 1, closed)
            self._curators.pop(round_id, None)  # a step that fails half-way leaves no curator behind
            steps, items = next_steps(items, rows, config.dim, done + 1, closed)
            for events in steps:
                release = curator.step(events.inserted, events.deleted)
                self.store.add_step_release(round_id, events.step, kind.release(config, release, round_id))
            self._curators[round_id] = (curator, items)

    def forget(self, round_id: str) -> None:
        """A deleted round's curator goes."""
        with self._guard:
            self._curators.pop(round_id, None)
            self._locks.pop(round_id, None)
