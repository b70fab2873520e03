"""Decode leases (issue 13): one decode per round across server replicas.

A decode takes the round's lease in the store, a heartbeat renews it while
the decode runs, and the result is written only if the lease is still held.
A round left ``decoding`` by a holder that is gone (lease expired, or a
process on this host that no longer runs) goes back to ``closed``.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time

from shoal.server.storage.store import Store


def new_holder() -> str:
    """This process's holder id: host, pid and a per-start nonce."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def heartbeat(store: Store, round_id: str, holder: str, lease_seconds: float) -> threading.Event:
    """Renew ``holder``'s lease every third of its length until the returned event is set."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(lease_seconds / 3):
            if not store.renew_lease(round_id, holder, time.time() + lease_seconds):
                return

    threading.Thread(target=beat, daemon=True, name="decode-lease").start()
    return stop


def free_stranded(store: Store, holder: str, only: str | None = None) -> tuple[list[str], list[str]]:
    """Free the leases of dead holders other than ``holder``; returns (freed, looked at)."""
    now, back, seen = time.time(), [], []
    for rid, who, until in store.leases():
        if (only is None or rid == only) and who != holder and (until < now or dead_here(who)):
            if store.free_lease(rid, who):
                back.append(rid)
            seen.append(rid)
    return back, seen


def dead_here(holder: str) -> bool:
    """Was ``holder`` (host:pid:nonce) a process on this host that has exited?"""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False
