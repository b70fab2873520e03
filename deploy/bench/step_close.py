"""What closing a continual round's step costs (``shoal bench --continual``'s
last table): the curator's events of the closing step read from the step
index and resolved against what the earlier steps left
(``Store.load_steps`` + ``events.next_steps``, what ``server/rounds/
steps.py`` does) against the whole stream read and resolved again
(``Store.load_payloads`` + ``events.split_steps``, what it did before).

A SQLite store in a temporary directory; each step ``per`` events, a fifth
of them (from the second step on) deletions of earlier items, the rest
insertions of new ones, d = 2. Both paths give the same events at every
probed step (checked); the step path runs at every step, as a server does.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from shoal.common.wire.fields import new_message_id
from shoal.server.decoders.continual.events import (
    DELETE,
    HEAD,
    INSERT,
    Items,
    next_steps,
    split_steps,
)
from shoal.server.storage.sqlite import SQLiteStore

DIM = 2


def close_costs(horizon: int, per: int, probes: tuple[int, ...], seed: int = 0) -> list[dict[str, Any]]:
    """Seconds of each path at the ``probes`` steps (and the step path's total over all steps)."""
    rng = np.random.default_rng(seed)
    rows_out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(str(Path(tmp) / "steps.db"))
        store.create_round("c", {"kind": "continual"})
        items, live = Items.empty(DIM), np.zeros((0, 2), dtype=np.uint64)
        total = 0.0
        for step in range(1, horizon + 1):
            rows = np.zeros((per, HEAD + DIM), dtype=np.uint64)
            rows[:, 1] = INSERT
            rows[:, 2:4] = rng.integers(0, 2**63, (per, 2), dtype=np.uint64)
            rows[:, HEAD:] = rng.uniform(-0.5, 0.5, (per, DIM)).view(np.uint64)
            gone = min(per // 5, live.shape[0])
            if gone:
                pick = rng.choice(live.shape[0], gone, replace=False)
                rows[:gone, 1], rows[:gone, 2:4] = DELETE, live[pick]
                live = np.delete(live, pick, axis=0)
            live = np.vstack([live, rows[gone:, 2:4]])
            store.add_events("c", [new_message_id() for _ in range(per)], rows)
            store.close_step("c", horizon)
            t = time.perf_counter()
            (mine,), items = next_steps(items, store.load_steps("c", HEAD + DIM, step, step), DIM, step, step)
            took = time.perf_counter() - t
            total += took
            if step in probes:
                t = time.perf_counter()
                (whole,) = split_steps(store.load_payloads("c", HEAD + DIM, np.uint64), DIM, step, step)
                again = time.perf_counter() - t
                if not (np.array_equal(mine.inserted, whole.inserted) and np.array_equal(mine.deleted, whole.deleted)):
                    raise AssertionError(f"step {step}: the two paths disagree")
                rows_out.append({"step": step, "events": step * per, "items": int(items.tokens.size),
                                 "whole_stream_ms": 1e3 * again, "own_rows_ms": 1e3 * took,
                                 "step_path_total_s": total})
        store._conn.close()
    return rows_out


def close_markdown(rows: list[dict[str, Any]], horizon: int, per: int) -> str:
    lines = [f"## Closing a step: its own rows (step index) against the whole stream (T = {horizon}, {per} events "
             f"a step, a fifth deletions, d = {DIM}; `deploy/bench/step_close.py`)", "",
             "| step | events stored | items kept | whole stream read + split_steps, ms | own rows + next_steps, ms | "
             "ratio |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['step']} | {r['events']} | {r['items']} | {r['whole_stream_ms']:.1f} | {r['own_rows_ms']:.2f} | "
              f"{r['whole_stream_ms'] / r['own_rows_ms']:.1f} x |" for r in rows]
    lines += ["", f"Every close by the step path: {rows[-1]['step_path_total_s']:.2f} s over {rows[-1]['step']} steps."]
    return "\n".join(lines) + "\n"
