"""Nothing acknowledged is lost: SIGKILL the server while devices send, restart, check."""

import sqlite3
import threading
import time

import httpx
import numpy as np

from shoal.client.encoder import encode_arrays
from shoal.common.config import config_from_dict


def test_every_acknowledged_report_survives_sigkill_exactly_once(server):
    r = httpx.post(server.url + "/rounds", json={"k": 2, "dim": 4, "epsilon": 2.0, "n_expected": 5000},
                   headers=server.op_headers())
    rid = r.json()["id"]
    cfg = config_from_dict(r.json()["config"])
    msgs = [m.model_dump_json() for m in encode_arrays(np.random.default_rng(0).uniform(-0.5, 0.5, (4000, 4)), cfg).to_messages()]
    acked: set[str] = set()
    lock = threading.Lock()
    stop = threading.Event()

    def sender(part: list[str]) -> None:
        with httpx.Client(timeout=5) as c:
            for m in part:
                if stop.is_set():
                    return
                try:
                    resp = c.post(server.url + f"/rounds/{rid}/reports", content=m.encode(),
                                  headers={"content-type": "application/json"})
                except httpx.HTTPError:
                    continue
                if resp.status_code == 202:
                    with lock:
                        acked.add(m.split('"message_id":"')[1][:32])

    threads = [threading.Thread(target=sender, args=(msgs[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    server.kill()  # SIGKILL while devices are sending
    stop.set()
    for t in threads:
        t.join()
    assert 0 < len(acked) < len(msgs)
    server.start()
    con = sqlite3.connect(server.db[len("sqlite:///"):])
    stored = [row[0] for row in con.execute("SELECT message_id FROM reports WHERE round_id = ?", (rid,))]
    assert acked <= set(stored)
    assert len(stored) == len(set(stored))
    # Devices retry everything: the round ends with each message exactly once.
    with httpx.Client(timeout=30) as c:
        for lo in range(0, len(msgs), 2000):
            body = '{"messages": [' + ",".join(msgs[lo:lo + 2000]) + "]}"
            assert c.post(server.url + f"/rounds/{rid}/reports/batch", content=body.encode(),
                          headers={"content-type": "application/json"}).status_code == 202
    assert httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == len(msgs)
