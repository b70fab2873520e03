"""Nothing acknowledged is lost: SIGKILL the server while devices send, restart, check."""


import httpx
import numpy as np
from tests_helpers import send_until_killed, stored_message_ids

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import config_from_dict


def test_every_acknowledged_report_survives_sigkill_exactly_once(server):
    r = httpx.post(server.url + "/rounds", json={"k": 2, "dim": 4, "epsilon": 2.0, "n_expected": 5000},
                   headers=server.op_headers())
    rid = r.json()["id"]
    cfg = config_from_dict(r.json()["config"])
    msgs = [m.model_dump_json() for m in encode_arrays(np.random.default_rng(0).uniform(-0.5, 0.5, (4000, 4)), cfg).to_messages()]
    acked_idx = send_until_killed(
        len(msgs),
        lambda c, i: c.post(server.url + f"/rounds/{rid}/reports", content=msgs[i].encode(),
                            headers={"content-type": "application/json"}),
        server.kill,
    )
    acked = {msgs[i].split('"message_id":"')[1][:32] for i in acked_idx}
    assert 0 < len(acked) < len(msgs)
    server.start()
    stored = stored_message_ids(server.db, rid)
    assert acked <= set(stored)
    assert len(stored) == len(set(stored))
    # Devices retry everything: the round ends with each message exactly once.
    with httpx.Client(timeout=30) as c:
        for lo in range(0, len(msgs), 2000):
            body = '{"messages": [' + ",".join(msgs[lo:lo + 2000]) + "]}"
            assert c.post(server.url + f"/rounds/{rid}/reports/batch", content=body.encode(),
                          headers={"content-type": "application/json"}).status_code == 202
    assert httpx.get(server.url + f"/rounds/{rid}").json()["reports"] == len(msgs)
